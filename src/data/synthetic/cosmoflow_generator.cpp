#include "crest/data/synthetic/cosmoflow_generator.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "crest/core/error.hpp"
#include "crest/data/synthetic/random_field.hpp"

namespace crest {
namespace {

// Stream ids: one independent family of draws per purpose (channels take kCounts + c).
constexpr uint64_t kStreamTargets = 0x100;
constexpr uint64_t kStreamField = 0x101;
constexpr uint64_t kStreamCounts = 0x200;

constexpr double kPi = 3.141592653589793;

// Larger grids cost time cubically; 512^3 is already 4 GiB of complex scratch.
constexpr int64_t kMaxSize = 512;

void check_spec(const CosmoflowSampleSpec& spec) {
  if (spec.size < 2 || spec.size > kMaxSize || !synthetic::fft_length_supported(spec.size))
    throw_usage("synthetic CosmoFlow size must be a product of 2s and 3s between 2 and " +
                std::to_string(kMaxSize) + " (e.g. 32, 64, 96, 128), got " +
                std::to_string(spec.size));
  if (spec.channels < 1 || spec.channels > 64)
    throw_usage("synthetic CosmoFlow channels must be in [1, 64], got " +
                std::to_string(spec.channels));
}

// sqrt(P(k)) per integer |k|^2 for P(k) ~ k^slope (smoothed, without the k = 0 mode), normalised so
// the field has unit variance at a voxel whatever the slope: then sigma alone sets the amplitude
// and the slope alone how that variance is shared among scales.
std::vector<double> amplitude_table(int64_t n, double slope) {
  // Gaussian smoothing over 1/128 of the box side (one voxel at 128^3): a fixed physical scale
  // standing in for the particle resolution, below which a pure power law is white-ish noise.
  // In box units exp(-(k R)^2) with k = 2 pi k_int / n and R = n / 128 voxels is
  // exp(-(2 pi k_int / 128)^2) for every n: a 32^3 sample is a coarser view of the same kind of
  // universe.
  constexpr double smoothing = 2 * kPi / 128.0;
  const int64_t half = n / 2;
  const int64_t k2_max = 3 * half * half;
  std::vector<int64_t> modes(static_cast<size_t>(k2_max + 1), 0);
  auto freq = [n](int64_t i) { return 2 * i < n ? i : i - n; };
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const int64_t ij = freq(i) * freq(i) + freq(j) * freq(j);
      for (int64_t l = 0; l < n; ++l) ++modes[static_cast<size_t>(ij + freq(l) * freq(l))];
    }
  std::vector<double> power(static_cast<size_t>(k2_max + 1), 0.0);
  double total = 0;
  for (int64_t k2 = 1; k2 <= k2_max; ++k2) {
    power[static_cast<size_t>(k2)] = std::pow(static_cast<double>(k2), 0.5 * slope) *
                                     std::exp(-static_cast<double>(k2) * smoothing * smoothing);
    total += power[static_cast<size_t>(k2)] * static_cast<double>(modes[static_cast<size_t>(k2)]);
  }
  std::vector<double> amp(power.size(), 0.0);
  if (total > 0)
    for (size_t k2 = 1; k2 < amp.size(); ++k2) amp[k2] = std::sqrt(power[k2] / total);
  return amp;
}

}  // namespace

CosmoflowParameters cosmoflow_parameters(const float targets[4]) {
  const double t0 = targets[0], t1 = targets[1], t2 = targets[2], t3 = targets[3];
  return {6.0 * std::exp(0.6 * t0), 0.9 * std::exp(0.35 * t1), -2.0 + 0.6 * t2, 0.6 + 0.4 * t3};
}

void generate_cosmoflow_sample(uint64_t seed, int64_t index, const CosmoflowSampleSpec& spec,
                               int16_t* volume, float* targets) {
  check_spec(spec);
  if (index < 0) throw_usage("synthetic CosmoFlow sample index must be >= 0");
  CREST_CHECK(volume != nullptr && targets != nullptr, "cosmoflow sample buffers");

  const uint64_t target_key = synthetic::stream_key(seed, index, kStreamTargets);
  for (int t = 0; t < 4; ++t)
    targets[t] =
        static_cast<float>(synthetic::uniform_in(target_key, static_cast<uint64_t>(t), -1, 1));
  // The parameters come from the stored (float) targets, so they are exactly what a reader sees.
  const CosmoflowParameters p = cosmoflow_parameters(targets);

  const int64_t n = spec.size, channels = spec.channels;
  const std::vector<double> field = synthetic::gaussian_random_field_3d(
      n, synthetic::stream_key(seed, index, kStreamField), amplitude_table(n, p.slope));

  // Channel c is the same universe at an earlier time: its Gaussian log-density is the last
  // channel's scaled by the growth factor D_c = exp(-growth * (C-1-c)/(C-1)), as linear growth
  // scales the initial field. exp(a g - a^2/2) is log-normal with mean 1, so the mean count
  // stays mean_count in every channel (mass is conserved) while the clustering grows.
  std::vector<double> log_amp(static_cast<size_t>(channels));
  std::vector<uint64_t> count_keys(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c) {
    const double lag =
        channels > 1 ? static_cast<double>(channels - 1 - c) / static_cast<double>(channels - 1)
                     : 0.0;
    log_amp[static_cast<size_t>(c)] = p.sigma * std::exp(-p.growth * lag);
    count_keys[static_cast<size_t>(c)] =
        synthetic::stream_key(seed, index, kStreamCounts + static_cast<uint64_t>(c));
  }
  const int64_t voxels = n * n * n;
#pragma omp parallel for schedule(static) if (synthetic::worth_parallel(voxels))
  for (int64_t v = 0; v < voxels; ++v) {
    const double g = field[static_cast<size_t>(v)];
    for (int64_t c = 0; c < channels; ++c) {
      const double a = log_amp[static_cast<size_t>(c)];
      const double rate = p.mean_count * std::exp(a * g - 0.5 * a * a);
      const int64_t count =
          synthetic::poisson(count_keys[static_cast<size_t>(c)], static_cast<uint64_t>(v), rate);
      volume[v * channels + c] = static_cast<int16_t>(std::min<int64_t>(count, 32767));
    }
  }
}

}  // namespace crest
