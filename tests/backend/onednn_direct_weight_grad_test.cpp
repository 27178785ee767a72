// crest's direct 3-D weight gradient (src/backends/onednn/direct_weight_grad_3d.hpp) against the
// reference backend's convolution: CosmoFlow's first layer class (4 input channels), channel
// counts that leave partial register tiles, odd and even extents, batch 1 and 3, stride and
// dilation, taps partly and wholly in the padding, several chunks of rows; the same bits for 1
// and 2 threads; which convolutions it takes, and that the oneDNN backend uses it where oneDNN's
// own pass is im2col + GEMM (the AVX2 level).
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/weight_grad_check.hpp"
#include "onednn/direct_weight_grad_3d.hpp"
#include "onednn/format.hpp"
#include "widest_vectors.hpp"

namespace crest {
namespace {

using onednn::DirectWeightGrad3d;
using testing::random_floats;

struct Axes {
  int64_t size, kernel = 3, stride = 1, dilation = 1, pad_lo = 1, pad_hi = 1;
};

ConvDesc conv3d(int64_t n, int64_t ic, int64_t oc, Axes d, Axes h, Axes w) {
  ConvDesc c;
  c.spatial_rank = 3;
  c.n = n;
  c.in_channels = ic;
  c.out_channels = oc;
  c.bias = false;
  const Axes axes[3] = {d, h, w};
  for (size_t i = 0; i < 3; ++i) {
    const Axes& a = axes[i];
    c.in_size[i] = a.size;
    c.kernel[i] = a.kernel;
    c.stride[i] = a.stride;
    c.dilation[i] = a.dilation;
    c.pad_lo[i] = a.pad_lo;
    c.pad_hi[i] = a.pad_hi;
    c.out_size[i] = (a.size + a.pad_lo + a.pad_hi - (a.kernel - 1) * a.dilation - 1) / a.stride + 1;
  }
  return c;
}

#define CREST_SKIP_WITHOUT_AVX2_FMA()     \
  if (!DirectWeightGrad3d::cpu_can_run()) \
  GTEST_SKIP() << "this CPU has no AVX2 + FMA, which the direct 3-D weight gradient needs"

void check(const ConvDesc& d) {
  testing::expect_weight_grad_like_reference<DirectWeightGrad3d>(d, DType::f32);
}

TEST(OneDnnDirectWeightGrad3d, AgreesWithTheReference) {
  CREST_SKIP_WITHOUT_AVX2_FMA();
  // CosmoFlow's conv1 class: 4 input channels (a tap row's 3 x 4 = 12 columns: two tiles of 6),
  // 32 outputs, odd extents.
  check(conv3d(3, 4, 32, {5}, {6}, {7}));
  // 13 inputs (39 columns: six tiles of 6, one of 3) and 24 outputs (a 16-wide and an 8-wide tile),
  // batch 1.
  check(conv3d(1, 13, 24, {4}, {5}, {6}));
  // Stride 2 on every axis, even extents.
  check(conv3d(2, 8, 16, {6}, {8}, {8, 3, 2}));
  // Dilation 2 with asymmetric padding (tiles of one tap along w: 6 inputs, one full tile): the
  // output is smaller than the input on one axis.
  check(conv3d(2, 6, 8, {5, 3, 1, 2, 2, 2}, {6, 3, 1, 2, 1, 1}, {7, 3, 1, 2, 0, 2}));
  // Dilation 3 on a 2-deep volume: the outer depth taps read only padding (their slices are 0).
  check(conv3d(2, 5, 16, {2, 3, 1, 3, 3, 3}, {4}, {5}));
  // 4 points per row: 256 rows per chunk, so 2 x 12 x 12 rows take two chunks.
  check(conv3d(2, 3, 8, {12}, {12}, {4}));
}

// A tile's lanes span several taps along w, each with its own range of outputs inside the
// volume: the edge points read only the lanes inside.
TEST(OneDnnDirectWeightGrad3d, TilesAcrossTheTapsAlongWReadOnlyInsideAtTheEdges) {
  CREST_SKIP_WITHOUT_AVX2_FMA();
  // Kernel 5 along w with padding 2 before and none after: every lane of a tile has another
  // range; 4 inputs make tiles that start in the middle of a tap.
  check(conv3d(2, 4, 16, {3}, {3}, {7, 5, 1, 1, 2, 0}));
  // 2 points along w under a 5-wide kernel: tiles whose lanes have no output in common (and
  // taps reading only padding), 7 inputs (35 columns: a tile of 5 at the end).
  check(conv3d(1, 7, 8, {3}, {4}, {2, 5, 1, 1, 2, 2}));
  // A 1-wide kernel along w: one tap per run.
  check(conv3d(2, 5, 8, {4}, {3}, {6, 1, 1, 1, 0, 0}));
  // Stride 3 along w with a 4-wide kernel and uneven padding.
  check(conv3d(2, 3, 24, {3}, {3}, {11, 4, 3, 1, 2, 1}));
}

TEST(OneDnnDirectWeightGrad3d, GivesTheSameBitsForOneAndTwoThreads) {
  CREST_SKIP_WITHOUT_AVX2_FMA();
  const ConvDesc d = conv3d(2, 10, 32, {6}, {12}, {5});
  const Shape in{d.n, d.in_channels, d.in_size[0], d.in_size[1], d.in_size[2]};
  const Shape out{d.n, d.out_channels, d.out_size[0], d.out_size[1], d.out_size[2]};
  const auto x = random_floats(static_cast<size_t>(in.numel()), 21);
  const auto dy = random_floats(static_cast<size_t>(out.numel()), 22);
  DirectWeightGrad3d kernel(std::make_shared<onednn::Context>(), d);
  Buffer scratch(kernel.scratch_bytes());
  const auto gradient = [&](int threads) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    std::vector<float> dw(static_cast<size_t>(d.in_channels * d.out_channels * 27));
    kernel.run(x.data(), dy.data(), dw.data(), scratch.data());
    omp_set_num_threads(saved);
    return dw;
  };
  const std::vector<float> one = gradient(1), two = gradient(2);
  EXPECT_EQ(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)), 0);
}

// The bias gradient (a split convolution's, whose bias gradient cannot be taken from the pooled
// gradient) against the reference, on 3 chunks of rows, with the same bits for 1 and 2 threads.
TEST(OneDnnDirectWeightGrad3d, BiasGradientIsTheSumOverEveryOutputPoint) {
  CREST_SKIP_WITHOUT_AVX2_FMA();
  ConvDesc d = conv3d(2, 3, 24, {6}, {20}, {20});
  d.bias = true;
  const Shape in{d.n, d.in_channels, d.in_size[0], d.in_size[1], d.in_size[2]};
  const Shape out{d.n, d.out_channels, d.out_size[0], d.out_size[1], d.out_size[2]};
  const auto x = random_floats(static_cast<size_t>(in.numel()), 31);
  const auto dy = random_floats(static_cast<size_t>(out.numel()), 32);
  std::vector<float> dw(static_cast<size_t>(d.in_channels * d.out_channels * 27));
  std::vector<float> want(static_cast<size_t>(d.out_channels));
  make_backend("reference")
      ->conv(d, plain_format(in, DType::f32))
      ->backward_weights(x.data(), dy.data(), dw.data(), want.data(), nullptr);
  const auto ys = testing::channels_last_bytes(
      dy, d.n, d.out_channels, d.out_size[0] * d.out_size[1], d.out_size[2], DType::f32);
  DirectWeightGrad3d kernel(std::make_shared<onednn::Context>(), d);
  ASSERT_TRUE(kernel.computes_bias_grad());
  const auto bias_gradient = [&](int threads) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    std::vector<float> db(want.size(), std::nanf(""));
    kernel.bias_grad(ys.data(), db.data());
    omp_set_num_threads(saved);
    return db;
  };
  const std::vector<float> one = bias_gradient(1), two = bias_gradient(2);
  testing::expect_close(two, want, 1e-5, "bias gradient");
  EXPECT_EQ(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)), 0);
}

TEST(OneDnnDirectWeightGrad3d, TakesOnlyFloat32ChannelsLast3dWithLongRows) {
  const ConvDesc d = conv3d(2, 4, 16, {2}, {3}, {32});
  const Shape in{2, 4, 2, 3, 32}, out{2, 16, 2, 3, 32};
  const auto src = onednn::layout_desc(in, DType::f32, Layout::channels_last);
  const auto dst = onednn::layout_desc(out, DType::f32, Layout::channels_last);
  const bool here = cpu_level() >= CpuLevel::avx2 && DirectWeightGrad3d::cpu_can_run();
  EXPECT_EQ(DirectWeightGrad3d::applies(d, src, dst), here)
      << "at crest's level " << cpu_level_name(cpu_level());
  if (!here) return;  // capped below AVX2 (or no FMA): nothing else is taken either
  const auto plain_src = onednn::layout_desc(in, DType::f32, Layout::plain);
  EXPECT_FALSE(DirectWeightGrad3d::applies(d, plain_src, dst));
  ConvDesc biased = d;
  biased.bias = true;
  EXPECT_TRUE(DirectWeightGrad3d::applies(biased, src, dst));  // it computes the bias gradient
  biased.bias_grad = false;
  EXPECT_TRUE(DirectWeightGrad3d::applies(biased, src, dst));
  ConvDesc half = d;
  half.dtype = DType::bf16;
  EXPECT_FALSE(DirectWeightGrad3d::applies(half, src, dst));
  ConvDesc grouped = d;
  grouped.groups = 2;
  EXPECT_FALSE(DirectWeightGrad3d::applies(grouped, src, dst));
  const ConvDesc odd_outputs = conv3d(2, 4, 12, {2}, {3}, {32});
  EXPECT_FALSE(DirectWeightGrad3d::applies(
      odd_outputs, src,
      onednn::layout_desc(Shape{2, 12, 2, 3, 32}, DType::f32, Layout::channels_last)));
  // 16-point rows: oneDNN's GEMM is faster there.
  const ConvDesc short_rows = conv3d(2, 4, 16, {2}, {3}, {16});
  EXPECT_FALSE(DirectWeightGrad3d::applies(
      short_rows, onednn::layout_desc(Shape{2, 4, 2, 3, 16}, DType::f32, Layout::channels_last),
      onednn::layout_desc(Shape{2, 16, 2, 3, 16}, DType::f32, Layout::channels_last)));
}

// Where oneDNN's own 3-D backward weights would be im2col + GEMM (every AVX2 CPU with oneDNN 3.2),
// the backend's convolution names and runs this kernel; oneDNN's direct kernels stay elsewhere.
TEST(OneDnnDirectWeightGrad3d, RunsInTheBackendWhereOneDnnWouldUseGemm) {
  if (cpu_level() < CpuLevel::avx2 || !DirectWeightGrad3d::cpu_can_run())
    GTEST_SKIP() << "at " << cpu_level_name(cpu_level()) << " oneDNN's kernels run";
  // Without the bias gradient (training programs sum it from the pooled gradient) and with it
  // (a split convolution).
  for (const bool bias_grad : {false, true}) {
    ConvDesc d = conv3d(2, 8, 16, {2}, {3}, {32});
    d.bias = true;
    d.bias_grad = bias_grad;
    auto k = make_backend("onednn")->conv(
        d, plain_format(Shape{2, 8, 2, 3, 32}, DType::f32, Layout::channels_last));
    const std::string impl = k->implementation();
    EXPECT_EQ(impl.find("gemm"), std::string::npos) << impl;
    if (cpu_level() == CpuLevel::avx2) {
      EXPECT_NE(impl.find("crest direct weight gradient"), std::string::npos) << impl;
    }
  }
}

}  // namespace
}  // namespace crest
