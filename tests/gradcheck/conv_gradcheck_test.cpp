// Gradient checks of the reference convolution and transposed convolution: input, weight and bias
// gradients against central differences, for every option of ConvDesc.
#include <gtest/gtest.h>

#include "backends/reference/reference_backend.hpp"
#include "gradcheck/gradcheck_util.hpp"

namespace crest {
namespace {

using gradcheck::dot;
using gradcheck::expect_gradient;
using gradcheck::poisoned;
using gradcheck::random_vector;
using Axes = std::array<int64_t, 3>;

// A conv descriptor in f64 with out_size derived from the geometry (written out here rather than
// taken from the backend, so a wrong formula there is caught by its validation).
ConvDesc conv(int rank, int64_t n, int64_t cin, int64_t cout, Axes in, Axes kernel,
              Axes stride = {1, 1, 1}, Axes pad_lo = {0, 0, 0}, Axes pad_hi = {0, 0, 0},
              Axes dilation = {1, 1, 1}, int64_t groups = 1, bool bias = true) {
  ConvDesc d;
  d.spatial_rank = rank;
  d.n = n;
  d.in_channels = cin;
  d.out_channels = cout;
  d.groups = groups;
  d.in_size = in;
  d.kernel = kernel;
  d.stride = stride;
  d.pad_lo = pad_lo;
  d.pad_hi = pad_hi;
  d.dilation = dilation;
  d.bias = bias;
  d.dtype = DType::f64;
  for (size_t i = 0; i < 3; ++i)
    d.out_size[i] =
        (in[i] + pad_lo[i] + pad_hi[i] - dilation[i] * (kernel[i] - 1) - 1) / stride[i] + 1;
  return d;
}

// The transposed counterpart: out = (in - 1) * stride - pads + dilation * (k - 1) + 1 + extra.
ConvDesc deconv(int rank, int64_t n, int64_t cin, int64_t cout, Axes in, Axes kernel, Axes stride,
                Axes pad_lo, Axes pad_hi, Axes dilation = {1, 1, 1}, int64_t groups = 1,
                Axes output_padding = {0, 0, 0}) {
  ConvDesc d = conv(rank, n, cin, cout, in, kernel, stride, pad_lo, pad_hi, dilation, groups);
  d.transposed = true;
  for (size_t i = 0; i < 3; ++i)
    d.out_size[i] = (in[i] - 1) * stride[i] - pad_lo[i] - pad_hi[i] +
                    dilation[i] * (kernel[i] - 1) + 1 + output_padding[i];
  return d;
}

int64_t weight_count(const ConvDesc& d) {
  int64_t k = 1;
  for (int i = 0; i < d.spatial_rank; ++i) k *= d.kernel[static_cast<size_t>(i)];
  return d.transposed ? d.in_channels * (d.out_channels / d.groups) * k
                      : d.out_channels * (d.in_channels / d.groups) * k;
}

// L = sum(r * conv(x; w, b)); checks dL/dx, dL/dw and dL/db.
void check_conv(const ConvDesc& d, uint64_t seed = 1) {
  auto backend = make_reference_backend();
  auto kernel = backend->conv(d, plain_format(Shape{1}, d.dtype));
  const auto src_count = static_cast<size_t>(kernel->src_format().shape.numel());
  const auto dst_count = static_cast<size_t>(kernel->dst_format().shape.numel());
  const auto w_count = static_cast<size_t>(weight_count(d));
  const auto b_count = static_cast<size_t>(d.out_channels);
  ASSERT_EQ(kernel->scratch_bytes(), 0u);

  std::vector<double> x = random_vector(src_count, seed);
  std::vector<double> w = random_vector(w_count, seed + 1);
  std::vector<double> b = random_vector(b_count, seed + 2);
  const std::vector<double> r = random_vector(dst_count, seed + 3);
  std::vector<double> y(dst_count);
  auto loss = [&] {
    kernel->forward(x.data(), w.data(), d.bias ? b.data() : nullptr, y.data(), nullptr);
    return dot(r, y);
  };
  loss();

  // backward_* take the gradient wrt the pre-activation; apply the post-op's backward first.
  std::vector<double> diff_pre = r;
  if (d.post_op.kind != EltwiseKind::none)
    backend->eltwise(d.post_op, kernel->dst_format())
        ->backward(y.data(), r.data(), diff_pre.data());
  std::vector<double> dx = poisoned(src_count), dw = poisoned(w_count), db = poisoned(b_count);
  kernel->backward_data(diff_pre.data(), w.data(), dx.data(), nullptr);
  kernel->backward_weights(x.data(), diff_pre.data(), dw.data(), d.bias ? db.data() : nullptr,
                           nullptr);

  expect_gradient("d src", x, dx, loss);
  expect_gradient("d weights", w, dw, loss);
  if (d.bias) expect_gradient("d bias", b, db, loss);
}

TEST(GradCheck, Conv1dPad1) {
  check_conv(conv(1, 2, 2, 3, {7, 1, 1}, {3, 1, 1}, {1, 1, 1}, {1, 0, 0}, {1, 0, 0}));
}

TEST(GradCheck, Conv1dStride2Dilation2AsymmetricPad) {
  check_conv(conv(1, 2, 2, 2, {11, 1, 1}, {3, 1, 1}, {2, 1, 1}, {2, 0, 0}, {1, 0, 0}, {2, 1, 1}));
}

TEST(GradCheck, Conv2dStride2Pad1) {
  check_conv(conv(2, 2, 2, 3, {6, 5, 1}, {3, 3, 1}, {2, 2, 1}, {1, 1, 0}, {1, 1, 0}));
}

TEST(GradCheck, Conv2dAsymmetricPad) {
  check_conv(conv(2, 1, 2, 2, {5, 6, 1}, {3, 2, 1}, {1, 1, 1}, {2, 0, 0}, {0, 1, 0}));
}

TEST(GradCheck, Conv2dDilation2) {
  check_conv(conv(2, 1, 2, 2, {7, 6, 1}, {3, 3, 1}, {1, 1, 1}, {2, 2, 0}, {2, 2, 0}, {2, 2, 1}));
}

TEST(GradCheck, Conv2dGroups2) {
  check_conv(conv(2, 2, 4, 6, {5, 4, 1}, {3, 3, 1}, {1, 1, 1}, {1, 1, 0}, {1, 1, 0}, {1, 1, 1}, 2));
}

TEST(GradCheck, Conv2dDepthwise) {
  check_conv(conv(2, 2, 3, 3, {5, 5, 1}, {3, 3, 1}, {1, 1, 1}, {1, 1, 0}, {1, 1, 0}, {1, 1, 1}, 3));
}

TEST(GradCheck, Conv2dDepthwiseMultiplier2) {
  check_conv(conv(2, 1, 2, 4, {4, 5, 1}, {2, 3, 1}, {2, 1, 1}, {0, 1, 0}, {1, 1, 0}, {1, 1, 1}, 2));
}

TEST(GradCheck, Conv2dNoBias) {
  check_conv(conv(2, 2, 2, 3, {5, 5, 1}, {3, 3, 1}, {1, 1, 1}, {1, 1, 0}, {1, 1, 0}, {1, 1, 1}, 1,
                  /*bias=*/false));
}

TEST(GradCheck, Conv2dTanhPostOp) {
  ConvDesc d = conv(2, 2, 2, 3, {5, 4, 1}, {3, 3, 1}, {1, 1, 1}, {1, 1, 0}, {1, 1, 0});
  d.post_op = {EltwiseKind::tanh, 0.f, 0.f};
  check_conv(d);
}

TEST(GradCheck, Conv2dLinearPostOp) {
  ConvDesc d = conv(2, 1, 2, 2, {4, 4, 1}, {3, 3, 1}, {1, 1, 1}, {1, 1, 0}, {1, 1, 0});
  d.post_op = {EltwiseKind::linear, -1.5f, 0.25f};
  check_conv(d);
}

TEST(GradCheck, Conv3dStride2Pad1) {
  check_conv(conv(3, 1, 2, 2, {5, 5, 5}, {3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {1, 1, 1}));
}

TEST(GradCheck, Conv3dDilation2Groups2AsymmetricPad) {
  check_conv(conv(3, 2, 2, 4, {4, 5, 4}, {2, 2, 2}, {1, 2, 1}, {1, 0, 2}, {0, 1, 1}, {2, 2, 2}, 2));
}

TEST(GradCheck, Conv3dKernel1) { check_conv(conv(3, 2, 3, 2, {2, 3, 2}, {1, 1, 1})); }

TEST(GradCheck, ConvTransposed1dStride2OutputPadding) {
  check_conv(deconv(1, 2, 2, 3, {4, 1, 1}, {3, 1, 1}, {2, 1, 1}, {1, 0, 0}, {1, 0, 0}, {1, 1, 1}, 1,
                    {1, 0, 0}));
}

TEST(GradCheck, ConvTransposed2dStride2) {
  check_conv(deconv(2, 2, 3, 2, {3, 3, 1}, {3, 3, 1}, {2, 2, 1}, {1, 1, 0}, {1, 1, 0}));
}

TEST(GradCheck, ConvTransposed2dDilation2AsymmetricPad) {
  check_conv(deconv(2, 1, 2, 2, {3, 4, 1}, {2, 3, 1}, {1, 2, 1}, {1, 0, 0}, {0, 2, 0}, {2, 2, 1}));
}

TEST(GradCheck, ConvTransposed3dStride2Groups2) {
  check_conv(
      deconv(3, 1, 4, 2, {2, 3, 2}, {2, 2, 2}, {2, 2, 2}, {0, 0, 0}, {0, 0, 0}, {1, 1, 1}, 2));
}

TEST(GradCheck, ConvTransposed2dNoBiasSigmoidPostOp) {
  ConvDesc d = deconv(2, 1, 2, 3, {3, 2, 1}, {2, 2, 1}, {2, 2, 1}, {0, 0, 0}, {0, 0, 0});
  d.bias = false;
  d.post_op = {EltwiseKind::sigmoid, 0.f, 0.f};
  check_conv(d);
}

}  // namespace
}  // namespace crest
