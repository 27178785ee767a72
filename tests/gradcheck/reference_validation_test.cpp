// Descriptor validation of the reference backend: bad descriptors throw crest::Error of kind
// input with a message naming the problem; layouts the oracle cannot read throw runtime errors.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "backends/reference/reference_backend.hpp"
#include "crest/core/error.hpp"

namespace crest {
namespace {

// Runs `f` and checks it throws crest::Error of `kind` whose message contains `needle`.
void expect_error(const std::function<void()>& f, ErrorKind kind, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "expected crest::Error containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

ConvDesc valid_conv() {
  ConvDesc d;
  d.spatial_rank = 2;
  d.in_channels = 4;
  d.out_channels = 6;
  d.groups = 2;
  d.in_size = {8, 8, 1};
  d.kernel = {3, 3, 1};
  d.stride = {2, 2, 1};
  d.pad_lo = d.pad_hi = {1, 1, 0};
  d.out_size = {4, 4, 1};
  return d;
}

TEST(Reference, ConvValidationAcceptsValid) {
  EXPECT_NO_THROW(make_reference_backend()->conv(valid_conv(), {}));
}

TEST(Reference, ConvRejectsBadDescriptors) {
  auto b = make_reference_backend();
  ConvDesc d = valid_conv();
  d.groups = 4;
  d.out_channels = 6;
  expect_error([&] { b->conv(d, {}); }, ErrorKind::input, "divisible by groups");
  d = valid_conv();
  d.out_size = {5, 4, 1};
  expect_error([&] { b->conv(d, {}); }, ErrorKind::input, "out_size[0] is 5");
  d = valid_conv();
  d.kernel = {0, 3, 1};
  expect_error([&] { b->conv(d, {}); }, ErrorKind::input, "must be positive");
  d = valid_conv();
  d.pad_lo = {-1, 1, 0};
  expect_error([&] { b->conv(d, {}); }, ErrorKind::input, "padding must be >= 0");
  d = valid_conv();
  d.spatial_rank = 4;
  expect_error([&] { b->conv(d, {}); }, ErrorKind::input, "spatial_rank");
  d = valid_conv();
  d.n = 0;
  expect_error([&] { b->conv(d, {}); }, ErrorKind::input, "positive");
  d = valid_conv();
  d.dtype = DType::i64;  // refused by the backend's supports() before the kernel is made
  expect_error([&] { b->conv(d, {}); }, ErrorKind::usage, "i64 tensors are not supported");
  d = valid_conv();
  d.post_op = {EltwiseKind::leaky_relu, 0.f, 0.f};
  expect_error([&] { b->conv(d, {}); }, ErrorKind::input, "leaky_relu");
}

// in 3, kernel 3, stride 2, pad 1/1: the minimum transposed output is 5; 6 (output padding 1) is
// fine, 4 and 7 are not.
TEST(Reference, TransposedConvOutputSizeRange) {
  auto b = make_reference_backend();
  ConvDesc d;
  d.spatial_rank = 1;
  d.transposed = true;
  d.in_size = {3, 1, 1};
  d.kernel = {3, 1, 1};
  d.stride = {2, 1, 1};
  d.pad_lo = d.pad_hi = {1, 0, 0};
  for (int64_t out : {5, 6}) {
    d.out_size = {out, 1, 1};
    EXPECT_NO_THROW(b->conv(d, {})) << out;
  }
  for (int64_t out : {4, 7}) {
    d.out_size = {out, 1, 1};
    expect_error([&] { b->conv(d, {}); }, ErrorKind::input, "output padding");
  }
}

TEST(Reference, PoolRejectsBadDescriptors) {
  auto b = make_reference_backend();
  PoolDesc d;
  d.spatial_rank = 2;
  d.in_size = {4, 4, 1};
  d.kernel = {2, 2, 1};
  d.stride = {2, 2, 1};
  d.out_size = {2, 2, 1};
  EXPECT_NO_THROW(b->pool(d, {}));
  PoolDesc bad = d;
  bad.out_size = {3, 2, 1};
  expect_error([&] { b->pool(bad, {}); }, ErrorKind::input, "out_size[0] is 3");
  bad = d;
  bad.pad_lo = {2, 0, 0};
  bad.out_size = {3, 2, 1};
  expect_error([&] { b->pool(bad, {}); }, ErrorKind::input, "smaller than the kernel");
  bad = d;
  bad.stride = {0, 2, 1};
  expect_error([&] { b->pool(bad, {}); }, ErrorKind::input, "must be positive");
  bad = d;
  bad.dtype = DType::i32;
  expect_error([&] { b->pool(bad, {}); }, ErrorKind::usage, "i32 tensors are not supported");
}

TEST(Reference, OtherKernelsRejectBadInput) {
  auto b = make_reference_backend();
  DenseDesc dense;
  dense.in_features = 0;
  expect_error([&] { b->dense(dense); }, ErrorKind::input, "in_features");
  expect_error([&] { b->vector_ops(DType::i32); }, ErrorKind::usage,
               "i32 tensors are not supported");
  expect_error(
      [&] {
        b->eltwise({EltwiseKind::relu, -0.5f, 0.f}, plain_format(Shape{4}, DType::f32));
      },
      ErrorKind::input, "relu");
  expect_error([&] { b->concat({}); }, ErrorKind::input, "at least one");
  expect_error(
      [&] {
        b->concat(
            {plain_format(Shape{2, 3, 4}, DType::f32), plain_format(Shape{2, 3, 5}, DType::f32)});
      },
      ErrorKind::input, "does not match");
  expect_error(
      [&] {
        b->reorder(plain_format(Shape{2, 3, 4}, DType::f32),
                   plain_format(Shape{2, 3, 5}, DType::f64));
      },
      ErrorKind::input, "same shape");
  expect_error(
      [&] {
        b->reorder(plain_format(Shape{2, 3}, DType::f32),
                   plain_format(Shape{2, 3}, DType::f32, Layout::channels_last));
      },
      ErrorKind::input, "rank 3 to 5");
  MemFormat blocked = plain_format(Shape{2, 16, 4, 4}, DType::f32, Layout::blocked);
  expect_error(
      [&] {
        b->reorder(blocked, plain_format(Shape{2, 16, 4, 4}, DType::f32));
      },
      ErrorKind::runtime, "blocked");
  expect_error(
      [&] {
        b->eltwise({EltwiseKind::tanh, 0.f, 0.f}, blocked);
      },
      ErrorKind::usage, "cannot read blocked format");
}

TEST(Reference, LossesRejectBadInput) {
  auto v = make_reference_backend()->vector_ops(DType::f64);
  const std::vector<double> logits{0, 0};
  const std::vector<int32_t> labels{2};
  expect_error(
      [&] {
        v->softmax_cross_entropy(logits.data(), labels.data(), nullptr, 0.0, nullptr, 1, 2, 1, 1.0);
      },
      ErrorKind::input, "label 2");
  std::vector<double> x(2);
  expect_error([&] { v->dropout(x.data(), x.data(), 2, 1.5f, 0); }, ErrorKind::input, "rate");
  expect_error(
      [&] {
        v->adam(x.data(), x.data(), x.data(), x.data(), 2, 0.1, 0.9, 0.999, 1e-8, 0.0, true, 0);
      },
      ErrorKind::input, "1-based");
}

}  // namespace
}  // namespace crest
