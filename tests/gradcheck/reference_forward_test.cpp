// Forward values of the reference kernels against hand-computed numbers, so the forward pass is
// pinned on its own and not only by its consistency with backward.
#include <gtest/gtest.h>

#include <cmath>

#include "backends/reference/reference_backend.hpp"
#include "gradcheck/gradcheck_util.hpp"

namespace crest {
namespace {

ConvDesc conv1d(int64_t in, int64_t k, int64_t out) {
  ConvDesc d;
  d.spatial_rank = 1;
  d.in_size = {in, 1, 1};
  d.kernel = {k, 1, 1};
  d.out_size = {out, 1, 1};
  d.dtype = DType::f64;
  return d;
}

TEST(Reference, BackendProperties) {
  auto b = make_reference_backend();
  EXPECT_EQ(b->name(), "reference");
  EXPECT_EQ(b->device(), Device::cpu);
  EXPECT_TRUE(b->supports(DType::f32));
  EXPECT_TRUE(b->supports(DType::f64));
  EXPECT_TRUE(b->supports(DType::bf16));  // emulated through float32 (half_emulation.cpp)
  EXPECT_TRUE(b->supports(DType::f16));
  EXPECT_FALSE(b->supports(DType::i32));
  EXPECT_FALSE(b->fuses({EltwiseKind::none, 0.f, 0.f}));
  EXPECT_TRUE(b->fuses({EltwiseKind::relu, 0.f, 0.f}));
  EXPECT_TRUE(b->fuses({EltwiseKind::sigmoid, 0.f, 0.f}));
  b->set_threads(4);  // accepted and ignored
}

// y[o] = x[o - 1] - x[o + 1] + 0.5 with zero padding at both ends.
TEST(Reference, Conv1dKnownValues) {
  ConvDesc d = conv1d(5, 3, 5);
  d.pad_lo = {1, 0, 0};
  d.pad_hi = {1, 0, 0};
  auto k = make_reference_backend()->conv(d, plain_format(Shape{1, 1, 5}, DType::f64));
  EXPECT_EQ(k->src_format(), plain_format(Shape{1, 1, 5}, DType::f64));
  EXPECT_EQ(k->dst_format(), plain_format(Shape{1, 1, 5}, DType::f64));
  const std::vector<double> x{1, 2, 3, 4, 5}, w{1, 0, -1}, b{0.5};
  std::vector<double> y(5);
  k->forward(x.data(), w.data(), b.data(), y.data(), nullptr);
  EXPECT_EQ(y, (std::vector<double>{-1.5, -1.5, -1.5, -1.5, 4.5}));
}

// Taps at x[2o] and x[2o + 2]: y = x[2o] + 10 x[2o + 2].
TEST(Reference, Conv1dStride2Dilation2KnownValues) {
  ConvDesc d = conv1d(7, 2, 3);
  d.stride = {2, 1, 1};
  d.dilation = {2, 1, 1};
  d.bias = false;
  auto k = make_reference_backend()->conv(d, plain_format(Shape{1, 1, 7}, DType::f64));
  const std::vector<double> x{1, 2, 3, 4, 5, 6, 7}, w{1, 10};
  std::vector<double> y(3);
  k->forward(x.data(), w.data(), nullptr, y.data(), nullptr);
  EXPECT_EQ(y, (std::vector<double>{31, 53, 75}));
}

// Two groups of one channel: each output channel sees only its own input channel.
TEST(Reference, Conv2dGroupsDoNotMix) {
  ConvDesc d;
  d.spatial_rank = 2;
  d.in_channels = d.out_channels = d.groups = 2;
  d.in_size = d.out_size = {1, 2, 1};
  d.kernel = {1, 1, 1};
  d.bias = false;
  d.dtype = DType::f64;
  auto k = make_reference_backend()->conv(d, plain_format(Shape{1, 2, 1, 2}, DType::f64));
  const std::vector<double> x{1, 2, 3, 4}, w{2, -1};
  std::vector<double> y(4);
  k->forward(x.data(), w.data(), nullptr, y.data(), nullptr);
  EXPECT_EQ(y, (std::vector<double>{2, 4, -3, -4}));
}

// Each input scatters w = [1, 1, 1] at 2i; the sixth output (output padding) gets only the bias.
TEST(Reference, ConvTransposed1dKnownValues) {
  ConvDesc d = conv1d(2, 3, 6);
  d.stride = {2, 1, 1};
  d.transposed = true;
  auto k = make_reference_backend()->conv(d, plain_format(Shape{1, 1, 2}, DType::f64));
  EXPECT_EQ(k->dst_format().shape, (Shape{1, 1, 6}));
  const std::vector<double> x{1, 2}, w{1, 1, 1}, b{0.5};
  std::vector<double> y(6);
  k->forward(x.data(), w.data(), b.data(), y.data(), nullptr);
  EXPECT_EQ(y, (std::vector<double>{1.5, 1.5, 3.5, 2.5, 2.5, 0.5}));
}

// Transposed weights are [in, out / groups, k]: in channel 0 feeds out channels 0 and 1.
TEST(Reference, ConvTransposedWeightLayout) {
  ConvDesc d = conv1d(1, 1, 1);
  d.in_channels = 1;
  d.out_channels = 2;
  d.transposed = true;
  d.bias = false;
  auto k = make_reference_backend()->conv(d, plain_format(Shape{1, 1, 1}, DType::f64));
  const std::vector<double> x{3}, w{2, 5};
  std::vector<double> y(2);
  k->forward(x.data(), w.data(), nullptr, y.data(), nullptr);
  EXPECT_EQ(y, (std::vector<double>{6, 15}));
}

// The post-op sees conv + bias: 1 * 1 - 2 = -1 before the activation.
TEST(Reference, ConvPostOpAppliedAfterBias) {
  ConvDesc d = conv1d(1, 1, 1);
  const std::vector<double> x{1}, w{1}, b{-2};
  std::vector<double> y(1);
  d.post_op = {EltwiseKind::relu, 0.f, 0.f};
  make_reference_backend()->conv(d, {})->forward(x.data(), w.data(), b.data(), y.data(), nullptr);
  EXPECT_EQ(y[0], 0.0);
  d.post_op = {EltwiseKind::leaky_relu, 0.25f, 0.f};
  make_reference_backend()->conv(d, {})->forward(x.data(), w.data(), b.data(), y.data(), nullptr);
  EXPECT_EQ(y[0], -0.25);
}

PoolDesc pool1d(PoolKind kind, int64_t in, int64_t k, int64_t pad, int64_t out) {
  PoolDesc d;
  d.kind = kind;
  d.spatial_rank = 1;
  d.in_size = {in, 1, 1};
  d.kernel = {k, 1, 1};
  d.pad_lo = d.pad_hi = {pad, 0, 0};
  d.out_size = {out, 1, 1};
  d.dtype = DType::f64;
  return d;
}

// Ties go to the first maximum; backward routes each diff to its argmax.
TEST(Reference, MaxPoolTiesPickFirst) {
  auto k = make_reference_backend()->pool(pool1d(PoolKind::max, 5, 2, 0, 4), {});
  ASSERT_EQ(k->workspace_bytes(), 4 * sizeof(int64_t));
  const std::vector<double> x{3, 3, 1, 5, 5};
  std::vector<double> y(4), dx(5);
  std::vector<int64_t> ws(4);
  k->forward(x.data(), y.data(), ws.data(), nullptr);
  EXPECT_EQ(y, (std::vector<double>{3, 3, 5, 5}));
  EXPECT_EQ(ws, (std::vector<int64_t>{0, 1, 3, 3}));
  const std::vector<double> dy{1, 1, 1, 1};
  k->backward(dy.data(), ws.data(), dx.data(), nullptr);
  EXPECT_EQ(dx, (std::vector<double>{1, 1, 0, 2, 0}));
}

// All inputs negative: a padded zero would win if padding took part.
TEST(Reference, MaxPoolPaddingNeverWins) {
  auto k = make_reference_backend()->pool(pool1d(PoolKind::max, 3, 3, 1, 3), {});
  const std::vector<double> x{-3, -1, -2};
  std::vector<double> y(3);
  std::vector<int64_t> ws(3);
  k->forward(x.data(), y.data(), ws.data(), nullptr);
  EXPECT_EQ(y, (std::vector<double>{-1, -1, -1}));
}

TEST(Reference, AvgPoolIncludeVsExcludePad) {
  const std::vector<double> x{2, 4, 6};
  std::vector<double> y(3);
  auto include = make_reference_backend()->pool(pool1d(PoolKind::avg_include_pad, 3, 3, 1, 3), {});
  EXPECT_EQ(include->workspace_bytes(), 0u);
  include->forward(x.data(), y.data(), nullptr, nullptr);
  EXPECT_DOUBLE_EQ(y[0], 2.0);
  EXPECT_DOUBLE_EQ(y[1], 4.0);
  EXPECT_DOUBLE_EQ(y[2], 10.0 / 3.0);
  auto exclude = make_reference_backend()->pool(pool1d(PoolKind::avg_exclude_pad, 3, 3, 1, 3), {});
  exclude->forward(x.data(), y.data(), nullptr, nullptr);
  EXPECT_EQ(y, (std::vector<double>{3, 4, 5}));
}

TEST(Reference, EltwiseKnownValues) {
  auto b = make_reference_backend();
  const MemFormat f = plain_format(Shape{1, 4}, DType::f64);
  const std::vector<double> x{-2, -0.5, 0, 3};
  std::vector<double> y(4);
  b->eltwise({EltwiseKind::relu, 0.f, 0.f}, f)->forward(x.data(), y.data());
  EXPECT_EQ(y, (std::vector<double>{0, 0, 0, 3}));
  b->eltwise({EltwiseKind::relu, 0.5f, 0.f}, f)->forward(x.data(), y.data());
  EXPECT_EQ(y, (std::vector<double>{-1, -0.25, 0, 3}));
  b->eltwise({EltwiseKind::leaky_relu, 0.5f, 0.f}, f)->forward(x.data(), y.data());
  EXPECT_EQ(y, (std::vector<double>{-1, -0.25, 0, 3}));
  b->eltwise({EltwiseKind::linear, 2.f, 1.f}, f)->forward(x.data(), y.data());
  EXPECT_EQ(y, (std::vector<double>{-3, 0, 1, 7}));
  b->eltwise({EltwiseKind::tanh, 0.f, 0.f}, f)->forward(x.data(), y.data());
  EXPECT_DOUBLE_EQ(y[0], std::tanh(-2.0));
  EXPECT_EQ(y[2], 0.0);
  b->eltwise({EltwiseKind::sigmoid, 0.f, 0.f}, f)->forward(x.data(), y.data());
  EXPECT_DOUBLE_EQ(y[0], 1.0 / (1.0 + std::exp(2.0)));
  EXPECT_EQ(y[2], 0.5);
}

// Derivatives from the output: relu/leaky use the output's sign, tanh 1 - y^2, sigmoid y(1 - y).
TEST(Reference, EltwiseBackwardFromDst) {
  auto b = make_reference_backend();
  const MemFormat f = plain_format(Shape{3}, DType::f64);
  const std::vector<double> dy{1, 1, 1};
  std::vector<double> dx(3);
  const std::vector<double> relu_out{-0.2, 0, 3};
  b->eltwise({EltwiseKind::leaky_relu, 0.1f, 0.f}, f)
      ->backward(relu_out.data(), dy.data(), dx.data());
  EXPECT_EQ(dx, (std::vector<double>{static_cast<double>(0.1f), static_cast<double>(0.1f), 1}));
  const std::vector<double> tanh_out{0.5, 0, -0.5};
  b->eltwise({EltwiseKind::tanh, 0.f, 0.f}, f)->backward(tanh_out.data(), dy.data(), dx.data());
  EXPECT_EQ(dx, (std::vector<double>{0.75, 1, 0.75}));
  const std::vector<double> sig_out{0.5, 0.25, 1};
  b->eltwise({EltwiseKind::sigmoid, 0.f, 0.f}, f)->backward(sig_out.data(), dy.data(), dx.data());
  EXPECT_EQ(dx, (std::vector<double>{0.25, 0.1875, 0}));
}

// The f32 sigmoid must not overflow for large |x|.
TEST(Reference, SigmoidSaturatesWithoutNan) {
  auto k = make_reference_backend()->eltwise({EltwiseKind::sigmoid, 0.f, 0.f},
                                             plain_format(Shape{2}, DType::f32));
  const std::vector<float> x{-1000.f, 1000.f};
  std::vector<float> y(2);
  k->forward(x.data(), y.data());
  EXPECT_EQ(y, (std::vector<float>{0.f, 1.f}));
}

TEST(Reference, DenseKnownValues) {
  DenseDesc d;
  d.n = 1;
  d.in_features = 2;
  d.out_features = 3;
  d.dtype = DType::f64;
  auto k = make_reference_backend()->dense(d);
  EXPECT_EQ(k->scratch_bytes(), 0u);
  const std::vector<double> x{1, 2}, w{1, 0, 0, 1, 1, 1}, b{0, 1, 2};
  std::vector<double> y(3);
  k->forward(x.data(), w.data(), b.data(), y.data(), nullptr);
  EXPECT_EQ(y, (std::vector<double>{1, 3, 5}));
}

// [1, 2, 3] plain (C = 2, S = 3) -> channels_last puts the two channels of each position together.
TEST(Reference, ReorderPlainToChannelsLast) {
  auto b = make_reference_backend();
  const Shape s{1, 2, 3};
  auto k =
      b->reorder(plain_format(s, DType::f64), plain_format(s, DType::f64, Layout::channels_last));
  const std::vector<double> x{0, 1, 2, 3, 4, 5};
  std::vector<double> y(6);
  k->execute(x.data(), y.data());
  EXPECT_EQ(y, (std::vector<double>{0, 3, 1, 4, 2, 5}));
}

TEST(Reference, ReorderRoundTripRank5AndCopy) {
  auto b = make_reference_backend();
  const Shape s{2, 3, 2, 3, 4};
  const MemFormat plain = plain_format(s, DType::f32);
  const MemFormat last = plain_format(s, DType::f32, Layout::channels_last);
  std::vector<float> x(144), mid(144), back(144), copy(144);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  b->reorder(plain, last)->execute(x.data(), mid.data());
  // Element (n=0, c=1, d=1, h=0, w=2): plain offset (((0*3 + 1)*2 + 1)*3 + 0)*4 + 2 = 38,
  // channels_last offset (((0*2 + 1)*3 + 0)*4 + 2)*3 + 1 = 43.
  EXPECT_EQ(mid[43], x[38]);
  b->reorder(last, plain)->execute(mid.data(), back.data());
  EXPECT_EQ(back, x);
  b->reorder(plain, plain)->execute(x.data(), copy.data());
  EXPECT_EQ(copy, x);
}

// Batch items interleave: each one holds its inputs' channels back to back.
TEST(Reference, ConcatKnownValues) {
  auto k = make_reference_backend()->concat(
      {plain_format(Shape{2, 1, 2}, DType::f64), plain_format(Shape{2, 2, 2}, DType::f64)});
  EXPECT_EQ(k->dst_format(), plain_format(Shape{2, 3, 2}, DType::f64));
  const std::vector<double> a{1, 2, 7, 8}, b{3, 4, 5, 6, 9, 10, 11, 12};
  std::vector<double> y(12);
  k->forward({a.data(), b.data()}, y.data());
  EXPECT_EQ(y, (std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}));
  std::vector<double> da(4), db(8);
  k->backward(y.data(), {da.data(), db.data()});
  EXPECT_EQ(da, a);
  EXPECT_EQ(db, b);
}

// The f32 kernels compute the same function as the f64 ones (up to f32 rounding).
TEST(Reference, ConvFloatMatchesDouble) {
  ConvDesc d;
  d.spatial_rank = 2;
  d.n = 2;
  d.in_channels = 4;
  d.out_channels = 2;
  d.groups = 2;
  d.in_size = {5, 6, 1};
  d.kernel = {3, 3, 1};
  d.stride = {2, 1, 1};
  d.pad_lo = d.pad_hi = {1, 1, 0};
  d.out_size = {3, 6, 1};
  d.post_op = {EltwiseKind::tanh, 0.f, 0.f};
  auto b = make_reference_backend();
  d.dtype = DType::f64;
  auto k64 = b->conv(d, {});
  d.dtype = DType::f32;
  auto k32 = b->conv(d, {});
  EXPECT_EQ(k32->dst_format().dtype, DType::f32);
  const auto x = gradcheck::random_vector(240, 1), w = gradcheck::random_vector(36, 2),
             bias = gradcheck::random_vector(2, 3);
  const std::vector<float> xf(x.begin(), x.end()), wf(w.begin(), w.end()),
      bf(bias.begin(), bias.end());
  std::vector<double> y64(72);
  std::vector<float> y32(72);
  k64->forward(x.data(), w.data(), bias.data(), y64.data(), nullptr);
  k32->forward(xf.data(), wf.data(), bf.data(), y32.data(), nullptr);
  // The inputs differ by f32 rounding (~6e-8 relative) and the sums have 18 terms.
  for (size_t i = 0; i < y64.size(); ++i) EXPECT_NEAR(y32[i], y64[i], 1e-5) << i;
}

}  // namespace
}  // namespace crest
