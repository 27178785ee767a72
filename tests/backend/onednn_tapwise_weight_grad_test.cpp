// The tap-wise weight gradient (src/backends/onednn/tapwise_weight_grad.hpp) against the
// reference backend's convolution, float32 and bf16: taps partly in the padding, taps wholly in
// it (their slice must come out zero: the gradient starts as NaN), asymmetric padding,
// uneven dilation; and which convolutions it takes.
#include <gtest/gtest.h>

#include "backend/weight_grad_check.hpp"
#include "onednn/context.hpp"
#include "onednn/format.hpp"
#include "onednn/tapwise_weight_grad.hpp"

namespace crest {
namespace {

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

void check(const ConvDesc& d, DType dtype) {
  testing::expect_weight_grad_like_reference<onednn::TapwiseWeightGrad>(d, dtype);
}

TEST(OneDnnTapwiseWeightGrad, AgreesWithTheReference) {
  for (DType dtype : {DType::f32, DType::bf16}) {
    CREST_CONTINUE_WITHOUT_DTYPE("onednn", dtype);
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
