// Synthetic DeepCAM generator: the same bytes for the same (seed, index) whatever the thread
// count, labels and values in range, channel means at the statistics, class frequencies near the
// real data's, and features that carry the physical signatures a network can learn from.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "crest/core/error.hpp"
#include "crest/data/synthetic/deepcam_generator.hpp"
#include "crest/data/synthetic/random_field.hpp"

namespace crest {
namespace {

constexpr int kTMQ = 0, kU850 = 1, kV850 = 2, kPSL = 7;
constexpr int64_t kH = 96, kW = 144, kC = 16;  // the full grid / 8

struct Sample {
  std::vector<float> data, labels;
};

Sample make(uint64_t seed, int64_t index, int64_t h = kH, int64_t w = kW) {
  Sample s;
  s.data.resize(static_cast<size_t>(h * w * kC));
  s.labels.resize(static_cast<size_t>(h * w));
  generate_deepcam_sample(seed, index, {h, w, kC}, default_deepcam_channel_stats(), s.data.data(),
                          s.labels.data());
  return s;
}

class ThreadCountGuard {
 public:
  ThreadCountGuard() : saved_(omp_get_max_threads()) {}
  ~ThreadCountGuard() { omp_set_num_threads(saved_); }

 private:
  int saved_;
};

bool has_class(const Sample& s, float c) {
  return std::find(s.labels.begin(), s.labels.end(), c) != s.labels.end();
}

TEST(SyntheticDeepcam, SameSeedAndIndexGiveSameBytes) {
  const Sample a = make(3, 5), b = make(3, 5);
  EXPECT_EQ(a.data, b.data);
  EXPECT_EQ(a.labels, b.labels);
}

TEST(SyntheticDeepcam, DifferentIndexOrSeedGiveDifferentSamples) {
  const Sample a = make(3, 5);
  EXPECT_NE(a.data, make(3, 6).data);
  EXPECT_NE(a.data, make(4, 5).data);
}

TEST(SyntheticDeepcam, IndependentOfThreadCount) {
  // A grid large enough to run in parallel, and a sample with both kinds of feature, so their
  // painting is covered too.
  constexpr int64_t h = 384, w = 768;
  static_assert(h * w > synthetic::kParallelMinElements);
  ThreadCountGuard guard;
  omp_set_num_threads(1);
  int64_t index = 0;
  Sample one;
  for (;; ++index) {
    ASSERT_LT(index, 20) << "no sample with both a cyclone and a river";
    one = make(8, index, h, w);
    if (has_class(one, 1.0f) && has_class(one, 2.0f)) break;
  }
  omp_set_num_threads(2);
  const Sample two = make(8, index, h, w);
  omp_set_num_threads(3);
  const Sample three = make(8, index, h, w);
  EXPECT_EQ(one.data, two.data);
  EXPECT_EQ(one.labels, two.labels);
  EXPECT_EQ(one.data, three.data);
  EXPECT_EQ(one.labels, three.labels);
}

// Over 50 samples of 96 x 144 (the full grid / 8, feature sizes scaled with it):
//  - labels are exactly 0, 1 or 2, values within [minval, maxval];
//  - each channel's mean is within 0.25 std of the statistics' mean (the background has the
//    exact mean; features and clipping move it a little: PRECT most, ~0.1 std, from rain);
//  - each channel's std is within a factor 1.6 of the statistics' (PS and Z1000 lose ~15% to
//    clipping of the terrain's tail, PRECT gains ~25% from feature rain);
//  - class frequencies near the real ones: measured 0.000448 (cyclone) and 0.0131 (river) over
//    2000 samples (DISABLED_MeasureStatistics); with ~25 cyclones and ~65 rivers in 50 samples
//    the bands are [1/3, 3] x 0.00046 and [0.6, 1.6] x 0.0133 (deterministic for this seed).
TEST(SyntheticDeepcam, RangesMeansAndClassFrequencies) {
  const DeepcamChannelStats stats = default_deepcam_channel_stats();
  constexpr int kSamples = 50;
  double mean[kC] = {}, std_sum[kC] = {}, counts[3] = {};
  for (int64_t index = 0; index < kSamples; ++index) {
    const Sample s = make(21, index);
    for (float l : s.labels) {
      ASSERT_TRUE(l == 0.0f || l == 1.0f || l == 2.0f) << l;
      counts[static_cast<int>(l)] += 1;
    }
    double sum[kC] = {}, sq[kC] = {};
    for (int64_t i = 0; i < kH * kW; ++i)
      for (int64_t c = 0; c < kC; ++c) {
        const float v = s.data[static_cast<size_t>(i * kC + c)];
        ASSERT_GE(v, stats.minval[static_cast<size_t>(c)]) << kDeepcamChannelNames[c];
        ASSERT_LE(v, stats.maxval[static_cast<size_t>(c)]) << kDeepcamChannelNames[c];
        sum[c] += v, sq[c] += static_cast<double>(v) * v;
      }
    for (int64_t c = 0; c < kC; ++c) {
      const double m = sum[c] / (kH * kW);
      mean[c] += m / kSamples;
      std_sum[c] += std::sqrt(std::max(0.0, sq[c] / (kH * kW) - m * m)) / kSamples;
    }
  }
  for (size_t c = 0; c < static_cast<size_t>(kC); ++c) {
    EXPECT_NEAR(mean[c], stats.mean[c], 0.25 * stats.std[c]) << kDeepcamChannelNames[c];
    EXPECT_GT(std_sum[c], stats.std[c] / 1.6) << kDeepcamChannelNames[c];
    EXPECT_LT(std_sum[c], stats.std[c] * 1.6) << kDeepcamChannelNames[c];
  }
  const double total = counts[0] + counts[1] + counts[2];
  const double cyclone = counts[1] / total, river = counts[2] / total;
  std::printf("[ classes  ] 96x144, %d samples: background %.5f cyclone %.6f river %.5f\n",
              kSamples, counts[0] / total, cyclone, river);
  EXPECT_GT(cyclone, kDeepcamClassFrequencies[1] / 3);
  EXPECT_LT(cyclone, kDeepcamClassFrequencies[1] * 3);
  EXPECT_GT(river, kDeepcamClassFrequencies[2] * 0.6);
  EXPECT_LT(river, kDeepcamClassFrequencies[2] * 1.6);
}

// What makes the labels learnable: inside cyclones the sea-level pressure is low, the column
// moist and the wind strong; inside rivers the column is moist. Differences are required to be
// at least half the channel's std (measured: cyclone PSL -2.4 std, TMQ +1.8 std; river TMQ
// +1.3 std).
TEST(SyntheticDeepcam, FeaturesCarryTheirSignatures) {
  const DeepcamChannelStats stats = default_deepcam_channel_stats();
  double sum[3][3] = {}, wind[3] = {}, n[3] = {};  // [class][TMQ, PSL, -], |wind|
  for (int64_t index = 0; index < 30; ++index) {
    const Sample s = make(33, index);
    for (int64_t i = 0; i < kH * kW; ++i) {
      const auto k = static_cast<int>(s.labels[static_cast<size_t>(i)]);
      const float* px = &s.data[static_cast<size_t>(i * kC)];
      sum[k][0] += px[kTMQ];
      sum[k][1] += px[kPSL];
      wind[k] += std::hypot(px[kU850], px[kV850]);
      n[k] += 1;
    }
  }
  ASSERT_GT(n[1], 0);
  ASSERT_GT(n[2], 0);
  auto avg = [&](int k, int v) { return sum[k][v] / n[k]; };
  EXPECT_LT(avg(1, 1), avg(0, 1) - 0.5 * stats.std[kPSL]) << "cyclone sea-level pressure";
  EXPECT_GT(avg(1, 0), avg(0, 0) + 0.5 * stats.std[kTMQ]) << "cyclone moisture";
  EXPECT_GT(wind[1] / n[1], 1.5 * wind[0] / n[0]) << "cyclone wind";
  EXPECT_GT(avg(2, 0), avg(0, 0) + 0.5 * stats.std[kTMQ]) << "river moisture";
  EXPECT_GT(wind[2] / n[2], wind[0] / n[0]) << "river low-level jet";
}

TEST(SyntheticDeepcam, CyclonesTurnWithTheEarth) {
  // Circulation around each labelled core (anticlockwise in the north, clockwise in the south)
  // is what separates a cyclone from any moist low: the mean of (r x wind) over a ring of
  // pixels around each cyclone's centre has the hemisphere's sign.
  int checked = 0;
  for (int64_t index = 0; index < 200 && checked < 10; ++index) {
    const Sample s = make(44, index, 192, 288);
    std::vector<char> seen(s.labels.size(), 0);
    for (int64_t y0 = 0; y0 < 192; ++y0)
      for (int64_t x0 = 0; x0 < 288; ++x0) {
        if (s.labels[static_cast<size_t>(y0 * 288 + x0)] != 1.0f ||
            seen[static_cast<size_t>(y0 * 288 + x0)])
          continue;
        // Centroid of this blob (flood fill over 4-neighbours, no wrap: blobs are small).
        std::vector<int64_t> stack{y0 * 288 + x0};
        double cy = 0, cx = 0, m = 0;
        seen[static_cast<size_t>(y0 * 288 + x0)] = 1;
        while (!stack.empty()) {
          const int64_t p = stack.back();
          stack.pop_back();
          const int64_t y = p / 288, x = p % 288;
          cy += static_cast<double>(y), cx += static_cast<double>(x), m += 1;
          for (const auto& [dy, dx] : {std::pair{1, 0}, {-1, 0}, {0, 1}, {0, -1}}) {
            const int64_t yy = y + dy, xx = x + dx;
            if (yy < 0 || yy >= 192 || xx < 0 || xx >= 288) continue;
            const auto q = static_cast<size_t>(yy * 288 + xx);
            if (s.labels[q] == 1.0f && !seen[q]) seen[q] = 1, stack.push_back(yy * 288 + xx);
          }
        }
        cy /= m, cx /= m;
        if (cx < 12 || cx > 288 - 12) continue;  // skip blobs split by the date line
        // The ring spans the eyewall (peak wind at 0.6 of the core's radius) and the core's
        // edge, where the vortex outweighs the smooth background wind.
        const double radius = std::sqrt(m / 3.14159265358979);
        double circulation = 0;
        for (int64_t y = 0; y < 192; ++y)
          for (int64_t x = 0; x < 288; ++x) {
            const double de = static_cast<double>(x) - cx, dn = cy - static_cast<double>(y);
            const double r = std::hypot(de, dn);
            if (r < 0.3 * radius || r > 1.2 * radius) continue;
            const float* px = &s.data[static_cast<size_t>((y * 288 + x) * kC)];
            circulation += (de * px[kV850] - dn * px[kU850]) / r;
          }
        const double hemisphere = cy < 96 ? 1.0 : -1.0;  // row 0 is the north pole
        EXPECT_GT(hemisphere * circulation, 0) << "sample " << index << " at row " << cy;
        ++checked;
      }
  }
  EXPECT_GE(checked, 5);
}

TEST(SyntheticDeepcam, DefaultStatisticsAreConsistent) {
  const DeepcamChannelStats s = default_deepcam_channel_stats();
  ASSERT_EQ(s.mean.size(), 16u);
  for (size_t c = 0; c < 16; ++c) {
    EXPECT_LT(s.minval[c], s.mean[c]) << kDeepcamChannelNames[c];
    EXPECT_LT(s.mean[c], s.maxval[c]) << kDeepcamChannelNames[c];
    EXPECT_GT(s.std[c], 0) << kDeepcamChannelNames[c];
  }
  EXPECT_FLOAT_EQ(s.mean[0], 18.6588554f);    // TMQ, from deepcam_stats.h5
  EXPECT_FLOAT_EQ(s.maxval[6], 107250.219f);  // PS
}

TEST(SyntheticDeepcam, RejectsBadInputs) {
  std::vector<float> data(static_cast<size_t>(kH * kW * kC)), labels(static_cast<size_t>(kH * kW));
  const DeepcamChannelStats good = default_deepcam_channel_stats();
  DeepcamChannelStats short_stats = good;
  short_stats.std.pop_back();
  DeepcamChannelStats inverted = good;
  std::swap(inverted.minval[3], inverted.maxval[3]);
  EXPECT_THROW(generate_deepcam_sample(1, 0, {kH, kW, 15}, good, data.data(), labels.data()),
               Error);
  EXPECT_THROW(generate_deepcam_sample(1, 0, {8, kW, kC}, good, data.data(), labels.data()), Error);
  EXPECT_THROW(generate_deepcam_sample(1, 0, {kH, kW, kC}, short_stats, data.data(), labels.data()),
               Error);
  EXPECT_THROW(generate_deepcam_sample(1, 0, {kH, kW, kC}, inverted, data.data(), labels.data()),
               Error);
  EXPECT_THROW(generate_deepcam_sample(1, -1, {kH, kW, kC}, good, data.data(), labels.data()),
               Error);
}

// The figures in docs/synthetic-data.md: class frequencies and channel moments over many samples
// at three grid sizes (about 3 minutes on one core). Run with
//   crest_tests --gtest_also_run_disabled_tests --gtest_filter='SyntheticDeepcam.DISABLED_*'
TEST(SyntheticDeepcam, DISABLED_MeasureStatistics) {
  const DeepcamChannelStats stats = default_deepcam_channel_stats();
  struct Grid {
    int64_t h, w;
    int samples;
  };
  for (const Grid& g : {Grid{768, 1152, 400}, Grid{192, 288, 1000}, Grid{96, 144, 2000}}) {
    double counts[3] = {}, mean[kC] = {}, std_sum[kC] = {};
    const auto pixels = static_cast<double>(g.h * g.w);
    for (int64_t index = 0; index < g.samples; ++index) {
      const Sample s = make(77, index, g.h, g.w);
      for (float l : s.labels) counts[static_cast<int>(l)] += 1;
      double sum[kC] = {}, sq[kC] = {};
      for (int64_t i = 0; i < g.h * g.w; ++i)
        for (int64_t c = 0; c < kC; ++c) {
          const double v = s.data[static_cast<size_t>(i * kC + c)];
          sum[c] += v, sq[c] += v * v;
        }
      for (int64_t c = 0; c < kC; ++c) {
        const double m = sum[c] / pixels;
        mean[c] += m / g.samples;
        std_sum[c] += std::sqrt(std::max(0.0, sq[c] / pixels - m * m)) / g.samples;
      }
    }
    const double total = counts[0] + counts[1] + counts[2];
    std::printf("%lldx%lld, %d samples: background %.5f cyclone %.6f river %.5f\n",
                static_cast<long long>(g.h), static_cast<long long>(g.w), g.samples,
                counts[0] / total, counts[1] / total, counts[2] / total);
    for (size_t c = 0; c < static_cast<size_t>(kC); ++c)
      std::printf("  %-7s mean %.5g (stats %.5g, %+.3f std)  std %.4g (stats %.4g, x%.2f)\n",
                  kDeepcamChannelNames[c], mean[c], stats.mean[c],
                  (mean[c] - stats.mean[c]) / stats.std[c], std_sum[c], stats.std[c],
                  std_sum[c] / stats.std[c]);
  }
}

// One full-size sample on one core. The budget is 2 s (measured about 0.25 s); the limit is
// looser so a busy machine does not fail it.
TEST(SyntheticDeepcam, FullSizeSampleIsFast) {
  ThreadCountGuard guard;
  omp_set_num_threads(1);
  const auto start = std::chrono::steady_clock::now();
  const Sample s = make(1, 0, 768, 1152);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("[ timing   ] DeepCAM 768x1152x16 sample, 1 thread: %.3f s\n", seconds);
  const auto small_start = std::chrono::steady_clock::now();
  make(1, 0);
  std::printf(
      "[ timing   ] DeepCAM 96x144x16 sample, 1 thread: %.4f s\n",
      std::chrono::duration<double>(std::chrono::steady_clock::now() - small_start).count());
  EXPECT_EQ(s.labels.size(), size_t{768} * 1152);
  EXPECT_LT(seconds, 5.0);
}

}  // namespace
}  // namespace crest
