// VectorOps of the reference backend against hand-computed values: BLAS-1, losses, dropout and
// the optimizer updates.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "backends/dropout_hash.hpp"
#include "backends/reference/reference_backend.hpp"
#include "crest/core/bf16.hpp"

namespace crest {
namespace {

std::unique_ptr<VectorOps> ops(DType t = DType::f64) {
  return make_reference_backend()->vector_ops(t);
}

TEST(Reference, VectorOpsBasics) {
  auto v = ops();
  EXPECT_EQ(v->dtype(), DType::f64);
  EXPECT_EQ(ops(DType::f32)->dtype(), DType::f32);
  std::vector<double> a(3), b{1, 2, 3};
  v->fill(a.data(), 3, 2.5);
  EXPECT_EQ(a, (std::vector<double>{2.5, 2.5, 2.5}));
  v->add(a.data(), b.data(), a.data(), 3);  // dst aliases a
  EXPECT_EQ(a, (std::vector<double>{3.5, 4.5, 5.5}));
  v->axpy(-2.0, b.data(), a.data(), 3);
  EXPECT_EQ(a, (std::vector<double>{1.5, 0.5, -0.5}));
  v->scale(2.0, a.data(), a.data(), 3);
  EXPECT_EQ(a, (std::vector<double>{3, 1, -1}));
  EXPECT_EQ(v->sum_squares(a.data(), 3), 11.0);
  v->copy(b.data(), a.data(), 3);
  EXPECT_EQ(a, b);
}

// The lag's local correction: sent = own; update = s own - (previous - average); previous = s own;
// without a share to replace the update is s own. Values chosen so that each rounding is exact.
TEST(Reference, LagCorrectionKnownValues) {
  auto v = ops();
  std::vector<double> grads{1, -2, 4}, average{0.5, 0.5, 0.5}, previous{1.5, 0.5, -1}, sent(3);
  v->lag_correction(grads.data(), average.data(), previous.data(), sent.data(), 3, 0.5, true);
  EXPECT_EQ(sent, (std::vector<double>{1, -2, 4}));
  EXPECT_EQ(grads, (std::vector<double>{0.5 - 1, -1 - 0, 2 + 1.5}));
  EXPECT_EQ(previous, (std::vector<double>{0.5, -1, 2}));
  v->lag_correction(grads.data(), average.data(), previous.data(), sent.data(), 3, 2.0, false);
  EXPECT_EQ(sent, (std::vector<double>{-0.5, -1, 3.5}));
  EXPECT_EQ(grads, (std::vector<double>{-1, -2, 7}));
  EXPECT_EQ(previous, grads);
}

// bf16 addition (crest's vector loop, compiled per ISA) gives crest::float_to_bf16 of the float
// sum for every pair: halfway cases, signed zeros, overflow to infinity, NaN; enough elements for
// the parallel path and a tail.
TEST(Reference, Bf16AddRoundsEachSumOnceToNearestEven) {
  auto v = ops(DType::bf16);
  const size_t n = (1u << 15) + 13;
  std::vector<uint16_t> a(n), b(n), got(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = static_cast<uint16_t>(i * 40503u);
    b[i] = static_cast<uint16_t>((i * 2654435761u) >> 16);
  }
  a[0] = float_to_bf16(1.0f), b[0] = float_to_bf16(std::ldexp(1.0f, -8));  // a tie, to even
  a[1] = float_to_bf16(3e38f), b[1] = float_to_bf16(3e38f);                // overflow
  a[2] = 0x8000, b[2] = 0x8000;                                            // -0 + -0
  v->add(a.data(), b.data(), got.data(), n);
  for (size_t i = 0; i < n; ++i) {
    const uint16_t want = float_to_bf16(bf16_to_float(a[i]) + bf16_to_float(b[i]));
    const bool both_nan = std::isnan(bf16_to_float(want)) && std::isnan(bf16_to_float(got[i]));
    ASSERT_TRUE(got[i] == want || both_nan) << "element " << i << ": " << a[i] << " + " << b[i]
                                            << " gave " << got[i] << ", want " << want;
  }
  EXPECT_EQ(got[0], float_to_bf16(1.0f));
  EXPECT_EQ(got[1], 0x7f80);
  EXPECT_EQ(got[2], 0x8000);
}

// Sums of squares of two buffers over ranges with gaps, and an empty range.
TEST(Reference, RangeSumSquaresKnownValues) {
  auto v = ops();
  const std::vector<double> w{1, 2, 9, 3}, g{-1, 0.5, 9, 2};
  const std::vector<ElementRange> ranges{{0, 2}, {2, 0}, {3, 1}};
  double w_sq[3] = {-1, -1, -1}, g_sq[3] = {-1, -1, -1};
  v->range_sum_squares(w.data(), g.data(), ranges.data(), 3, w_sq, g_sq);
  EXPECT_EQ(w_sq[0], 5.0);
  EXPECT_EQ(g_sq[0], 1.25);
  EXPECT_EQ(w_sq[1], 0.0);
  EXPECT_EQ(g_sq[1], 0.0);
  EXPECT_EQ(w_sq[2], 9.0);
  EXPECT_EQ(g_sq[2], 4.0);
}

// d = 0.5 (g + 0.1 w); buf = 0.9 buf + d; w = w - 2 buf.
TEST(Reference, LarsUpdateKnownValues) {
  auto v = ops();
  std::vector<double> w{2, -4}, buf{1, 0};
  const std::vector<double> g{0.8, 0.4};
  v->lars_update(w.data(), g.data(), buf.data(), 2, 2.0, 0.9, 0.5, 0.1);
  EXPECT_DOUBLE_EQ(buf[0], 0.9 + 0.5 * (0.8 + 0.2));
  EXPECT_DOUBLE_EQ(buf[1], 0.5 * (0.4 - 0.4));
  EXPECT_DOUBLE_EQ(w[0], 2 - 2 * 1.4);
  EXPECT_DOUBLE_EQ(w[1], -4.0);
  EXPECT_EQ(g, (std::vector<double>{0.8, 0.4}));
}

TEST(Reference, MseKnownValues) {
  auto v = ops();
  const std::vector<double> pred{1, 2}, target{0, 0};
  std::vector<double> diff(2);
  EXPECT_EQ(v->mse(pred.data(), target.data(), diff.data(), 2, 1.0), 2.5);
  EXPECT_EQ(diff, (std::vector<double>{1, 2}));
  v->mse(pred.data(), target.data(), diff.data(), 2, 0.5);
  EXPECT_EQ(diff, (std::vector<double>{0.5, 1}));
}

// Two equal logits: loss log 2 and gradient softmax - onehot = (-0.5, 0.5).
TEST(Reference, SoftmaxCrossEntropyKnownValues) {
  auto v = ops();
  const std::vector<double> logits{0, 0};
  const std::vector<int32_t> labels{0};
  std::vector<double> diff(2);
  EXPECT_DOUBLE_EQ(v->softmax_cross_entropy(logits.data(), labels.data(), nullptr, 0.0, diff.data(),
                                            1, 2, 1, 1.0),
                   std::numbers::ln2);
  EXPECT_DOUBLE_EQ(diff[0], -0.5);
  EXPECT_DOUBLE_EQ(diff[1], 0.5);
  // A class weight scales both the loss and the gradient of that position.
  const std::vector<float> weights{3.f, 1.f};
  EXPECT_DOUBLE_EQ(v->softmax_cross_entropy(logits.data(), labels.data(), weights.data(), 0.0,
                                            diff.data(), 1, 2, 1, 1.0),
                   3.0 * std::numbers::ln2);
  EXPECT_DOUBLE_EQ(diff[0], -1.5);
}

// Layout [n, classes, spatial]: the classes of one position are `spatial` apart.
TEST(Reference, SoftmaxCrossEntropySpatialLayoutAndStability) {
  auto v = ops(DType::f32);
  // n = 1, classes = 2, spatial = 2: position 0 has logits (1000, 0), position 1 (0, 1000).
  const std::vector<float> logits{1000.f, 0.f, 0.f, 1000.f};
  const std::vector<int32_t> labels{1, 1};
  std::vector<float> diff(4);
  const double loss = v->softmax_cross_entropy(logits.data(), labels.data(), nullptr, 0.0,
                                               diff.data(), 1, 2, 2, 1.0);
  EXPECT_DOUBLE_EQ(loss, 500.0);  // mean of 1000 (wrong, confident) and 0 (right)
  EXPECT_EQ(diff, (std::vector<float>{0.5f, 0.f, -0.5f, 0.f}));
}

TEST(Reference, DropoutMaskAndRate) {
  auto v = ops();
  const size_t count = 100000;
  std::vector<double> x(count, 1.0), y(count), again(count), other(count);
  v->dropout(x.data(), y.data(), count, 0.25f, 99);
  size_t kept = 0;
  for (double e : y) {
    ASSERT_TRUE(e == 0.0 || e == 1.0 / 0.75);
    kept += e != 0.0;
  }
  // Binomial(1e5, 0.75): the standard deviation is ~137, so 1% is ~7 sigma.
  EXPECT_NEAR(static_cast<double>(kept) / count, 0.75, 0.01);
  v->dropout(x.data(), again.data(), count, 0.25f, 99);
  EXPECT_EQ(again, y);  // same seed, same mask
  v->dropout(x.data(), other.data(), count, 0.25f, 100);
  EXPECT_NE(other, y);  // consecutive seeds give unrelated masks
  v->dropout(x.data(), x.data(), count, 0.25f, 99);
  EXPECT_EQ(x, y);  // in place
  std::vector<double> ones(count, 1.0);
  v->dropout(ones.data(), y.data(), count, 0.f, 5);
  EXPECT_EQ(y, ones);
  v->dropout(ones.data(), y.data(), count, 1.f, 5);
  EXPECT_EQ(y, std::vector<double>(count, 0.0));
}

// A part of a tensor drawn at its position in the whole (dropout_at's `first`) gets the whole
// tensor's mask: how a spatially split block keeps the unsplit run's masks.
TEST(Reference, DropoutAtAPositionIsThatPartOfTheWholeMask) {
  auto v = ops();
  const size_t count = 1000, first = 377;
  std::vector<double> x(count);
  for (size_t i = 0; i < count; ++i) x[i] = 0.5 + 0.001 * static_cast<double>(i);
  std::vector<double> whole(count), part(count - first);
  v->dropout(x.data(), whole.data(), count, 0.5f, 11);
  v->dropout_at(x.data() + first, part.data(), count - first, 0.5f, 11, first);
  EXPECT_EQ(part, std::vector<double>(whole.begin() + first, whole.end()));
  v->dropout(x.data() + first, part.data(), count - first, 0.5f, 11);  // drawn from 0 instead
  EXPECT_NE(part, std::vector<double>(whole.begin() + first, whole.end()));
}

TEST(Reference, DropoutUniformRange) {
  double lo = 1.0, hi = 0.0, sum = 0.0;
  for (uint64_t i = 0; i < 10000; ++i) {
    const double u = dropout_uniform(7, i);
    lo = std::min(lo, u);
    hi = std::max(hi, u);
    sum += u;
  }
  EXPECT_GE(lo, 0.0);
  EXPECT_LT(hi, 1.0);
  EXPECT_NEAR(sum / 10000, 0.5, 0.01);
}

// Keras form: v = m v - lr g; w += v. Two steps from v = 0.2.
TEST(Reference, SgdKerasKnownValues) {
  auto v = ops();
  std::vector<double> w{1.0}, g{0.5}, vel{0.2};
  v->sgd_keras(w.data(), g.data(), vel.data(), 1, 0.1, 0.9, false);
  EXPECT_DOUBLE_EQ(vel[0], 0.13);
  EXPECT_DOUBLE_EQ(w[0], 1.13);
  v->sgd_keras(w.data(), g.data(), vel.data(), 1, 0.1, 0.9, false);
  EXPECT_DOUBLE_EQ(vel[0], 0.067);
  EXPECT_DOUBLE_EQ(w[0], 1.197);
}

// Keras's Nesterov form: the same velocity, and w += m v - lr g (v's next step added ahead).
TEST(Reference, SgdKerasNesterovKnownValues) {
  auto v = ops();
  std::vector<double> w{1.0}, g{0.5}, vel{0.2};
  v->sgd_keras(w.data(), g.data(), vel.data(), 1, 0.1, 0.9, true);
  EXPECT_DOUBLE_EQ(vel[0], 0.13);
  EXPECT_DOUBLE_EQ(w[0], 1.0 + 0.9 * 0.13 - 0.05);  // 1.067
  v->sgd_keras(w.data(), g.data(), vel.data(), 1, 0.1, 0.9, true);
  EXPECT_DOUBLE_EQ(vel[0], 0.067);
  EXPECT_DOUBLE_EQ(w[0], 1.067 + 0.9 * 0.067 - 0.05);
}

// One Adam step from zero moments: the bias-corrected moments are g and g^2.
TEST(Reference, AdamFirstStep) {
  auto v = ops();
  std::vector<double> w{1.0}, g{0.5}, m{0.0}, s{0.0};
  v->adam(w.data(), g.data(), m.data(), s.data(), 1, 0.1, 0.9, 0.999, 1e-8, 0.0, false, 1);
  EXPECT_DOUBLE_EQ(m[0], 0.05);
  EXPECT_DOUBLE_EQ(s[0], 0.00025);
  EXPECT_DOUBLE_EQ(w[0], 1.0 - 0.1 * (0.5 / (0.5 + 1e-8)));
}

// Second step: bias correction with beta^2.
TEST(Reference, AdamSecondStepBiasCorrection) {
  auto v = ops();
  std::vector<double> w{1.0}, g{0.5}, m{0.05}, s{0.00025};
  g[0] = -1.0;
  v->adam(w.data(), g.data(), m.data(), s.data(), 1, 0.01, 0.9, 0.999, 1e-8, 0.0, true, 2);
  const double m2 = 0.9 * 0.05 - 0.1, s2 = 0.999 * 0.00025 + 0.001;
  EXPECT_DOUBLE_EQ(m[0], m2);
  EXPECT_DOUBLE_EQ(s[0], s2);
  const double mhat = m2 / (1 - 0.81), shat = s2 / (1 - 0.999 * 0.999);
  EXPECT_DOUBLE_EQ(w[0], 1.0 - 0.01 * mhat / (std::sqrt(shat) + 1e-8));
}

// AdamW decays the weight directly; L2 Adam adds the decay to the gradient (so to the moments).
TEST(Reference, AdamWeightDecayDecoupledVersusL2) {
  auto v = ops();
  std::vector<double> w{2.0}, g{0.5}, m{0.0}, s{0.0};
  v->adam(w.data(), g.data(), m.data(), s.data(), 1, 0.1, 0.9, 0.999, 1e-8, 0.01, true, 1);
  EXPECT_DOUBLE_EQ(m[0], 0.05);
  EXPECT_DOUBLE_EQ(w[0], 2.0 - 0.1 * (0.5 / (0.5 + 1e-8) + 0.01 * 2.0));

  w = {2.0};
  m = {0.0};
  s = {0.0};
  v->adam(w.data(), g.data(), m.data(), s.data(), 1, 0.1, 0.9, 0.999, 1e-8, 0.01, false, 1);
  const double g_l2 = 0.5 + 0.01 * 2.0;
  EXPECT_DOUBLE_EQ(m[0], 0.1 * g_l2);
  EXPECT_DOUBLE_EQ(w[0], 2.0 - 0.1 * (g_l2 / (g_l2 + 1e-8)));
}

}  // namespace
}  // namespace crest
