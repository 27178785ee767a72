// The tap-wise weight gradient (src/backends/onednn/tapwise_weight_grad.hpp) against the
// reference backend's convolution, float32 and bf16: taps partly in the padding, taps wholly in
// it (their slice must come out zero: the gradient starts as garbage), asymmetric padding,
// uneven dilation; and which convolutions it takes.
#include <gtest/gtest.h>

#include "backend/backend_test_util.hpp"
#include "crest/core/bf16.hpp"
#include "onednn/context.hpp"
#include "onednn/format.hpp"
#include "onednn/tapwise_weight_grad.hpp"

namespace crest {
namespace {

using testing::expect_close;
using testing::random_floats;

ConvDesc dilated(int64_t ic, int64_t oc, int64_t h, int64_t w, std::array<int64_t, 2> dilation,
                 std::array<int64_t, 2> pad_lo, std::array<int64_t, 2> pad_hi) {
  ConvDesc d;
  d.spatial_rank = 2;
  d.n = 2;
  d.in_channels = ic;
  d.out_channels = oc;
  d.bias = false;
  for (size_t i = 0; i < 2; ++i) {
    d.in_size[i] = i == 0 ? h : w;
    d.kernel[i] = 3;
    d.dilation[i] = dilation[i];
    d.pad_lo[i] = pad_lo[i];
    d.pad_hi[i] = pad_hi[i];
    d.out_size[i] = d.in_size[i] + pad_lo[i] + pad_hi[i] - 2 * dilation[i];
  }
  return d;
}

// plain [n, c, h, w] floats -> channels-last bytes of `dtype`.
std::vector<char> channels_last(const std::vector<float>& x, int64_t n, int64_t c, int64_t h,
                                int64_t w, DType dtype) {
  std::vector<char> out(x.size() * dtype_size(dtype));
  for (int64_t b = 0; b < n; ++b)
    for (int64_t k = 0; k < c; ++k)
      for (int64_t p = 0; p < h * w; ++p) {
        const float v = x[static_cast<size_t>((b * c + k) * h * w + p)];
        const auto at = static_cast<size_t>((b * h * w + p) * c + k);
        if (dtype == DType::bf16) {
          const uint16_t code = float_to_bf16(v);
          std::memcpy(out.data() + at * 2, &code, 2);
        } else {
          std::memcpy(out.data() + at * 4, &v, 4);
        }
      }
  return out;
}

void check(const ConvDesc& d, DType dtype) {
  SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + std::to_string(d.in_size[0]) + "x" +
               std::to_string(d.in_size[1]) + " dilation " + std::to_string(d.dilation[0]) + "x" +
               std::to_string(d.dilation[1]));
  const int64_t in_px = d.in_size[0] * d.in_size[1], out_px = d.out_size[0] * d.out_size[1];
  auto x = random_floats(static_cast<size_t>(d.n * d.in_channels * in_px), 11);
  auto dy = random_floats(static_cast<size_t>(d.n * d.out_channels * out_px), 12);
  if (dtype == DType::bf16)  // the reference sees exactly the values the kernel reads
    for (auto* v : {&x, &dy})
      for (float& f : *v) f = bf16_to_float(float_to_bf16(f));
  const auto wcount = static_cast<size_t>(d.out_channels * d.in_channels * 9);
  std::vector<float> want(wcount);
  make_backend("reference")
      ->conv(d, plain_format(Shape{d.n, d.in_channels, d.in_size[0], d.in_size[1]}, DType::f32))
      ->backward_weights(x.data(), dy.data(), want.data(), nullptr, nullptr);

  ConvDesc dd = d;
  dd.dtype = dtype;
  auto ctx = std::make_shared<onednn::Context>();
  onednn::TapwiseWeightGrad t(ctx, dd);
  const auto xs = channels_last(x, d.n, d.in_channels, d.in_size[0], d.in_size[1], dtype);
  const auto ys = channels_last(dy, d.n, d.out_channels, d.out_size[0], d.out_size[1], dtype);
  Buffer scratch(t.scratch_bytes());
  std::vector<float> got(wcount, 1e30f);
  t.run(xs.data(), ys.data(), got.data(), scratch.data());
  expect_close(got, want, 1e-4, "weight gradient");
}

TEST(OneDnnTapwiseWeightGrad, AgreesWithTheReference) {
  for (DType dtype : {DType::f32, DType::bf16}) {
    // aspp2's shape in small: 4x6 map, dilation 2, padding 2: the outer taps partly in padding.
    check(dilated(32, 16, 4, 6, {2, 2}, {2, 2}, {2, 2}), dtype);
    // Dilation 4 on a 3-row map: the outer rows read only padding (empty taps).
    check(dilated(16, 16, 3, 7, {4, 2}, {4, 2}, {4, 2}), dtype);
    // Asymmetric padding: the output is smaller than the input on one axis.
    check(dilated(16, 8, 6, 5, {1, 2}, {0, 2}, {1, 1}), dtype);
  }
}

TEST(OneDnnTapwiseWeightGrad, TakesOnlyStrideOneChannelsLastWithoutBiasGradient) {
  ConvDesc d = dilated(32, 16, 4, 6, {2, 2}, {2, 2}, {2, 2});
  const auto src = onednn::layout_desc(Shape{2, 32, 4, 6}, DType::f32, Layout::channels_last);
  const auto dst = onednn::layout_desc(Shape{2, 16, 4, 6}, DType::f32, Layout::channels_last);
  EXPECT_TRUE(onednn::TapwiseWeightGrad::applies(d, src, dst));
  const auto plain_src = onednn::layout_desc(Shape{2, 32, 4, 6}, DType::f32, Layout::plain);
  EXPECT_FALSE(onednn::TapwiseWeightGrad::applies(d, plain_src, dst));
  ConvDesc biased = d;
  biased.bias = true;
  EXPECT_FALSE(onednn::TapwiseWeightGrad::applies(biased, src, dst));  // wants a bias gradient
  biased.bias_grad = false;
  EXPECT_TRUE(onednn::TapwiseWeightGrad::applies(biased, src, dst));
  ConvDesc grouped = d;
  grouped.groups = 2;
  EXPECT_FALSE(onednn::TapwiseWeightGrad::applies(grouped, src, dst));
  ConvDesc strided = d;
  strided.stride[0] = 2;
  EXPECT_FALSE(onednn::TapwiseWeightGrad::applies(strided, src, dst));
}

}  // namespace
}  // namespace crest
