// The phase-wise weight gradient of strided transposed convolutions
// (src/backends/onednn/phase_weight_grad.hpp) against the reference backend, float32 and bf16:
// DeepCAM's upsampling (3x3, stride 2, padding 1, output_padding 1), no padding, unequal strides,
// dilation, a stride larger than the kernel (phases no tap reads), padding that crops more than
// a kernel's reach, one and several samples; which convolutions it takes; and that the backend's
// transposed convolution routes there.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <vector>

#include "backend/weight_grad_check.hpp"
#include "onednn/format.hpp"
#include "onednn/phase_weight_grad.hpp"
#include "support/test_util.hpp"

namespace crest {
namespace {

struct Geometry {
  std::array<int64_t, 2> in, kernel, stride, pad, output_padding, dilation;
};

// A transposed convolution as crest's conv layer describes it: output_padding lowers pad_hi.
ConvDesc transposed(int64_t n, int64_t ic, int64_t oc, const Geometry& g) {
  ConvDesc d;
  d.spatial_rank = 2;
  d.transposed = true;
  d.n = n;
  d.in_channels = ic;
  d.out_channels = oc;
  d.bias = false;
  for (size_t i = 0; i < 2; ++i) {
    d.in_size[i] = g.in[i];
    d.kernel[i] = g.kernel[i];
    d.stride[i] = g.stride[i];
    d.dilation[i] = g.dilation[i];
    d.pad_lo[i] = g.pad[i];
    d.pad_hi[i] = g.pad[i] - g.output_padding[i];
    d.out_size[i] = (g.in[i] - 1) * g.stride[i] - 2 * g.pad[i] + g.dilation[i] * (g.kernel[i] - 1) +
                    1 + g.output_padding[i];
  }
  return d;
}

void check(const ConvDesc& d, DType dtype) {
  testing::expect_weight_grad_like_reference<onednn::PhaseWeightGrad>(d, dtype);
}

TEST(OneDnnPhaseWeightGrad, AgreesWithTheReference) {
  const Geometry deepcam{{5, 7}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}};
  const Geometry unpadded{{4, 3}, {3, 3}, {2, 2}, {0, 0}, {0, 0}, {1, 1}};
  const Geometry unequal{{4, 5}, {5, 3}, {3, 2}, {2, 1}, {2, 0}, {1, 1}};
  const Geometry dilated{{4, 6}, {3, 3}, {2, 2}, {1, 2}, {0, 1}, {2, 3}};
  const Geometry sparse{{3, 4}, {3, 2}, {4, 3}, {0, 0}, {0, 0}, {1, 1}};   // stride > kernel
  const Geometry cropped{{6, 5}, {3, 3}, {2, 2}, {3, 2}, {1, 0}, {1, 1}};  // pad > kernel's reach
  for (DType dtype : {DType::f32, DType::bf16}) {
    CREST_CONTINUE_WITHOUT_DTYPE("onednn", dtype);
    for (int64_t n : {1, 2}) {
      check(transposed(n, 24, 16, deepcam), dtype);
      check(transposed(n, 16, 8, unpadded), dtype);
      check(transposed(n, 8, 16, unequal), dtype);
      check(transposed(n, 16, 16, dilated), dtype);
      check(transposed(n, 8, 8, sparse), dtype);
      check(transposed(n, 8, 8, cropped), dtype);
    }
  }
}

TEST(OneDnnPhaseWeightGrad, TakesStridedTransposedChannelsLastWithoutBiasGradient) {
  const Geometry up{{6, 9}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}};
  const ConvDesc d = transposed(2, 64, 64, up);
  const auto src = onednn::layout_desc(Shape{2, 64, 6, 9}, DType::f32, Layout::channels_last);
  const auto dst = onednn::layout_desc(Shape{2, 64, 12, 18}, DType::f32, Layout::channels_last);
  EXPECT_TRUE(onednn::PhaseWeightGrad::applies(d, src, dst));
  const auto blocked = onednn::layout_desc(Shape{2, 64, 6, 9}, DType::f32, Layout::plain);
  EXPECT_FALSE(onednn::PhaseWeightGrad::applies(d, blocked, dst));
  ConvDesc biased = d;
  biased.bias = true;
  EXPECT_FALSE(onednn::PhaseWeightGrad::applies(biased, src, dst));  // wants a bias gradient
  biased.bias_grad = false;
  EXPECT_TRUE(onednn::PhaseWeightGrad::applies(biased, src, dst));
  ConvDesc forward_conv = d;
  forward_conv.transposed = false;
  EXPECT_FALSE(onednn::PhaseWeightGrad::applies(forward_conv, src, dst));
  ConvDesc unstrided = d;
  unstrided.stride = {1, 1, 1};
  EXPECT_FALSE(onednn::PhaseWeightGrad::applies(unstrided, src, dst));
  ConvDesc few = transposed(2, 64, 3, up);  // DeepCAM's last_deconv: 256 -> 3
  const auto few_dst = onednn::layout_desc(Shape{2, 3, 12, 18}, DType::f32, Layout::channels_last);
  EXPECT_FALSE(onednn::PhaseWeightGrad::applies(few, src, few_dst));
  ConvDesc inference = d;
  inference.training = false;
  EXPECT_FALSE(onednn::PhaseWeightGrad::applies(inference, src, dst));
}

// The onednn backend's transposed convolution, in the channels-last layout the phase-wise kernel
// takes, routes the weight gradient there: the same bits (DeepCAM's deconv shape in small).
TEST(OneDnnPhaseWeightGrad, TheBackendsTransposedConvolutionRunsIt) {
  CREST_SKIP_WITHOUT_BACKEND("onednn");
  const ConvDesc d = transposed(2, 64, 64, {{6, 9}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}});
  const Shape in{2, 64, 6, 9}, out{2, 64, 12, 18};
  auto conv = make_backend("onednn")->conv(d, plain_format(in, DType::f32, Layout::channels_last));
  ASSERT_EQ(conv->src_format().layout, Layout::channels_last);
  ASSERT_EQ(conv->dst_format().layout, Layout::channels_last);
  onednn::PhaseWeightGrad direct(std::make_shared<onednn::Context>(), d);
  const auto xs =
      testing::channels_last_bytes(testing::random_floats(in.numel(), 3), 2, 64, 6, 9, DType::f32);
  const auto ys = testing::channels_last_bytes(testing::random_floats(out.numel(), 4), 2, 64, 12,
                                               18, DType::f32);
  std::vector<float> routed(static_cast<size_t>(64 * 64 * 9)), own(routed.size());
  Buffer scratch(std::max(conv->scratch_bytes(), direct.scratch_bytes()));
  conv->backward_weights(xs.data(), ys.data(), routed.data(), nullptr, scratch.data());
  direct.run(xs.data(), ys.data(), own.data(), scratch.data());
  EXPECT_EQ(routed, own);
}

}  // namespace
}  // namespace crest
