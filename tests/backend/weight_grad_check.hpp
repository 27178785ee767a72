// The check the tests of crest's own weight-gradient kernels (onednn/weight_grad_kernel.hpp) run:
// the kernel on channels-last activations (2-D or 3-D) against the reference backend's convolution,
// with scratch and gradient starting as NaN, so a border the kernel forgets to zero or a slice it
// forgets to write shows.
#pragma once
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend_test_util.hpp"
#include "onednn/context.hpp"
#include "onednn/weight_grad_kernel.hpp"
#include "support/test_util.hpp"

namespace crest::testing {

// The sizes of a convolution's activations: [n, c, spatial...].
inline Shape activation_shape(const ConvDesc& d, int64_t channels,
                              const std::array<int64_t, 3>& size) {
  std::vector<int64_t> dims{d.n, channels};
  for (int a = 0; a < d.spatial_rank; ++a) dims.push_back(size[static_cast<size_t>(a)]);
  return Shape(dims);
}

inline std::string describe_axes(const std::array<int64_t, 3>& v, int rank) {
  std::string s;
  for (int a = 0; a < rank; ++a) s += (a ? "x" : "") + std::to_string(v[static_cast<size_t>(a)]);
  return s;
}

// `d` (2-D or 3-D) describes float32 activations; a `Kernel` made for `dtype` ones runs (bf16:
// the reference sees the same rounded values). Tolerance as expect_close's.
template <typename Kernel>
void expect_weight_grad_like_reference(const ConvDesc& d, DType dtype, double tol = 1e-4) {
  const int r = d.spatial_rank;
  SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + std::to_string(d.in_channels) + "->" +
               std::to_string(d.out_channels) + " " + describe_axes(d.in_size, r) + " -> " +
               describe_axes(d.out_size, r) + " kernel " + describe_axes(d.kernel, r) + " stride " +
               describe_axes(d.stride, r) + " dilation " + describe_axes(d.dilation, r) +
               " batch " + std::to_string(d.n));
  const Shape in_shape = activation_shape(d, d.in_channels, d.in_size);
  const Shape out_shape = activation_shape(d, d.out_channels, d.out_size);
  auto x = random_floats(static_cast<size_t>(in_shape.numel()), 11);
  auto dy = random_floats(static_cast<size_t>(out_shape.numel()), 12);
  if (dtype == DType::bf16)
    for (auto* v : {&x, &dy})
      for (float& f : *v) f = bf16_to_float(float_to_bf16(f));
  int64_t taps = 1;
  for (int a = 0; a < r; ++a) taps *= d.kernel[static_cast<size_t>(a)];
  const auto wcount = static_cast<size_t>(d.out_channels * d.in_channels * taps);
  std::vector<float> want(wcount);
  make_backend("reference")
      ->conv(d, plain_format(in_shape, DType::f32))
      ->backward_weights(x.data(), dy.data(), want.data(), nullptr, nullptr);
  // Channels-last of [n, c, d, h, w] is that of [n, c, d * h, w]: the 2-D helper lays out both.
  const int64_t in_rows = in_shape.numel() / (d.n * d.in_channels * in_shape[in_shape.rank() - 1]);
  const int64_t out_rows =
      out_shape.numel() / (d.n * d.out_channels * out_shape[out_shape.rank() - 1]);
  const auto xs =
      channels_last_bytes(x, d.n, d.in_channels, in_rows, in_shape[in_shape.rank() - 1], dtype);
  const auto ys = channels_last_bytes(dy, d.n, d.out_channels, out_rows,
                                      out_shape[out_shape.rank() - 1], dtype);

  ConvDesc dd = d;
  dd.dtype = dtype;
  std::unique_ptr<onednn::WeightGradKernel> kernel =
      std::make_unique<Kernel>(std::make_shared<onednn::Context>(), dd);
  Buffer scratch(kernel->scratch_bytes());
  std::memset(scratch.data(), 0xff, scratch.bytes());  // NaN as float32 and as bf16
  std::vector<float> got(wcount, std::nanf(""));
  kernel->run(xs.data(), ys.data(), got.data(), scratch.data());
  expect_close(got, want, tol, "weight gradient");
}

}  // namespace crest::testing
