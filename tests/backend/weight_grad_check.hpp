// The check the tests of crest's own weight-gradient kernels (onednn/weight_grad_kernel.hpp) run:
// the kernel on channels-last activations against the reference backend's convolution, with
// scratch and gradient starting as NaN, so a border the kernel forgets to zero or a slice it
// forgets to write shows.
#pragma once
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend_test_util.hpp"
#include "onednn/context.hpp"
#include "onednn/weight_grad_kernel.hpp"
#include "support/test_util.hpp"

namespace crest::testing {

// `d` describes float32 activations; a `Kernel` made for `dtype` ones runs (bf16: the reference
// sees the same rounded values). Tolerance as expect_close's.
template <typename Kernel>
void expect_weight_grad_like_reference(const ConvDesc& d, DType dtype, double tol = 1e-4) {
  SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + std::to_string(d.in_size[0]) + "x" +
               std::to_string(d.in_size[1]) + " -> " + std::to_string(d.out_size[0]) + "x" +
               std::to_string(d.out_size[1]) + " stride " + std::to_string(d.stride[0]) + "x" +
               std::to_string(d.stride[1]) + " dilation " + std::to_string(d.dilation[0]) + "x" +
               std::to_string(d.dilation[1]) + " batch " + std::to_string(d.n));
  const int64_t in_px = d.in_size[0] * d.in_size[1], out_px = d.out_size[0] * d.out_size[1];
  auto x = random_floats(static_cast<size_t>(d.n * d.in_channels * in_px), 11);
  auto dy = random_floats(static_cast<size_t>(d.n * d.out_channels * out_px), 12);
  if (dtype == DType::bf16)
    for (auto* v : {&x, &dy})
      for (float& f : *v) f = bf16_to_float(float_to_bf16(f));
  const auto wcount =
      static_cast<size_t>(d.out_channels * d.in_channels * d.kernel[0] * d.kernel[1]);
  std::vector<float> want(wcount);
  make_backend("reference")
      ->conv(d, plain_format(Shape{d.n, d.in_channels, d.in_size[0], d.in_size[1]}, DType::f32))
      ->backward_weights(x.data(), dy.data(), want.data(), nullptr, nullptr);

  ConvDesc dd = d;
  dd.dtype = dtype;
  std::unique_ptr<onednn::WeightGradKernel> kernel =
      std::make_unique<Kernel>(std::make_shared<onednn::Context>(), dd);
  const auto xs = channels_last_bytes(x, d.n, d.in_channels, d.in_size[0], d.in_size[1], dtype);
  const auto ys = channels_last_bytes(dy, d.n, d.out_channels, d.out_size[0], d.out_size[1], dtype);
  Buffer scratch(kernel->scratch_bytes());
  std::memset(scratch.data(), 0xff, scratch.bytes());  // NaN as float32 and as bf16
  std::vector<float> got(wcount, std::nanf(""));
  kernel->run(xs.data(), ys.data(), got.data(), scratch.data());
  expect_close(got, want, tol, "weight gradient");
}

}  // namespace crest::testing
