// Gradient checks of the reference pooling kernels. Max pooling is piecewise linear with kinks
// where two window elements tie, so its inputs are a shuffled grid of distinct values spaced far
// wider than the difference step: no argmax can change while one element is perturbed.
#include <gtest/gtest.h>

#include "backends/reference/reference_backend.hpp"
#include "gradcheck/gradcheck_util.hpp"

namespace crest {
namespace {

using gradcheck::dot;
using gradcheck::expect_gradient;
using gradcheck::poisoned;
using Axes = std::array<int64_t, 3>;

PoolDesc pool(PoolKind kind, int rank, int64_t n, int64_t c, Axes in, Axes kernel, Axes stride,
              Axes pad_lo = {0, 0, 0}, Axes pad_hi = {0, 0, 0}) {
  PoolDesc d;
  d.kind = kind;
  d.spatial_rank = rank;
  d.n = n;
  d.channels = c;
  d.in_size = in;
  d.kernel = kernel;
  d.stride = stride;
  d.pad_lo = pad_lo;
  d.pad_hi = pad_hi;
  d.dtype = DType::f64;
  for (size_t i = 0; i < 3; ++i)
    d.out_size[i] = (in[i] + pad_lo[i] + pad_hi[i] - kernel[i]) / stride[i] + 1;
  return d;
}

// L = sum(r * pool(x)); checks dL/dx.
void check_pool(const PoolDesc& d, uint64_t seed = 7) {
  auto kernel = make_reference_backend()->pool(d, plain_format(Shape{1}, d.dtype));
  const auto src_count = static_cast<size_t>(kernel->src_format().shape.numel());
  const auto dst_count = static_cast<size_t>(kernel->dst_format().shape.numel());
  std::vector<int64_t> workspace(kernel->workspace_bytes() / sizeof(int64_t) + 1);

  std::vector<double> x = gradcheck::distinct_values(src_count, seed);
  const std::vector<double> r = gradcheck::random_vector(dst_count, seed + 1);
  std::vector<double> y(dst_count);
  auto loss = [&] {
    kernel->forward(x.data(), y.data(), workspace.data(), nullptr);
    return dot(r, y);
  };
  loss();
  std::vector<double> dx = poisoned(src_count);
  kernel->backward(r.data(), workspace.data(), dx.data(), nullptr);
  expect_gradient("d src", x, dx, loss);
}

TEST(GradCheck, MaxPool1dOverlapping) {
  check_pool(pool(PoolKind::max, 1, 2, 2, {9, 1, 1}, {3, 1, 1}, {2, 1, 1}));
}

TEST(GradCheck, MaxPool2dStride2) {
  check_pool(pool(PoolKind::max, 2, 2, 2, {4, 6, 1}, {2, 2, 1}, {2, 2, 1}));
}

TEST(GradCheck, MaxPool2dPaddedOverlapping) {
  check_pool(pool(PoolKind::max, 2, 1, 2, {5, 5, 1}, {3, 3, 1}, {2, 2, 1}, {1, 1, 0}, {1, 1, 0}));
}

TEST(GradCheck, MaxPool3dStride2AsymmetricPad) {
  check_pool(pool(PoolKind::max, 3, 1, 2, {4, 5, 4}, {2, 3, 2}, {2, 2, 2}, {1, 0, 0}, {0, 2, 1}));
}

TEST(GradCheck, AvgPool2dIncludePadPadded) {
  check_pool(pool(PoolKind::avg_include_pad, 2, 2, 2, {5, 4, 1}, {3, 3, 1}, {2, 1, 1}, {1, 1, 0},
                  {1, 1, 0}));
}

TEST(GradCheck, AvgPool2dExcludePadPadded) {
  check_pool(pool(PoolKind::avg_exclude_pad, 2, 2, 2, {5, 4, 1}, {3, 3, 1}, {2, 1, 1}, {1, 1, 0},
                  {1, 1, 0}));
}

TEST(GradCheck, AvgPool1dExcludePadAsymmetric) {
  check_pool(pool(PoolKind::avg_exclude_pad, 1, 1, 3, {7, 1, 1}, {4, 1, 1}, {3, 1, 1}, {2, 0, 0},
                  {3, 0, 0}));
}

TEST(GradCheck, AvgPool3dIncludePadStride2) {
  check_pool(pool(PoolKind::avg_include_pad, 3, 1, 2, {4, 4, 5}, {2, 2, 3}, {2, 2, 2}, {0, 1, 1},
                  {0, 1, 1}));
}

TEST(GradCheck, AvgPool3dExcludePadStride2) {
  check_pool(pool(PoolKind::avg_exclude_pad, 3, 1, 2, {4, 4, 5}, {2, 2, 3}, {2, 2, 2}, {0, 1, 1},
                  {0, 1, 1}));
}

}  // namespace
}  // namespace crest
