// The onednn backend's f32 vector ops agree with the reference backend, and their reductions
// give the same bits for every thread count (and, for sum_squares, for every ISA clone).
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "backend/backend_test_util.hpp"
#include "crest/core/error.hpp"
#include "onednn/update_loops.hpp"

namespace crest {
namespace {

using testing::expect_close;
using testing::random_floats;

// Large enough to take the parallel paths (and several reduction chunks), small enough to be fast.
constexpr size_t kCount = 100'003;

class OneDnnVectorOps : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> ref_backend = make_backend("reference");
  std::unique_ptr<Backend> dnn_backend = make_backend("onednn");
  std::unique_ptr<VectorOps> ref = ref_backend->vector_ops(DType::f32);
  std::unique_ptr<VectorOps> dnn = dnn_backend->vector_ops(DType::f32);
  std::vector<float> a = random_floats(kCount, 71), b = random_floats(kCount, 72);
};

TEST_F(OneDnnVectorOps, ElementwiseAreBitExact) {
  EXPECT_EQ(dnn->dtype(), DType::f32);
  std::vector<float> r(kCount), g(kCount, 9.f);
  ref->fill(r.data(), kCount, 0.1);
  dnn->fill(g.data(), kCount, 0.1);
  EXPECT_EQ(g, r);

  dnn->copy(a.data(), g.data(), kCount);
  EXPECT_EQ(g, a);

  ref->add(a.data(), b.data(), r.data(), kCount);
  dnn->add(a.data(), b.data(), g.data(), kCount);
  EXPECT_EQ(g, r);
  g = a;
  dnn->add(g.data(), b.data(), g.data(), kCount);  // dst aliases a
  EXPECT_EQ(g, r);

  r = b;
  g = b;
  ref->axpy(-0.37, a.data(), r.data(), kCount);
  dnn->axpy(-0.37, a.data(), g.data(), kCount);
  EXPECT_EQ(g, r);

  ref->scale(1.7, a.data(), r.data(), kCount);
  g = a;
  dnn->scale(1.7, g.data(), g.data(), kCount);  // in place
  EXPECT_EQ(g, r);
}

TEST_F(OneDnnVectorOps, DropoutDropsTheSameElements) {
  for (float p : {0.f, 0.25f, 0.5f, 1.f}) {
    std::vector<float> r(kCount), g = a;
    ref->dropout(a.data(), r.data(), kCount, p, 1234);
    dnn->dropout(g.data(), g.data(), kCount, p, 1234);  // in place
    EXPECT_EQ(g, r) << "p " << p;
  }
  std::vector<float> g(kCount);
  EXPECT_THROW(dnn->dropout(a.data(), g.data(), kCount, 1.5f, 1), Error);
  // At a position in a larger tensor (a spatially split block's elements).
  const size_t first = 12345;
  std::vector<float> r(kCount);
  ref->dropout_at(a.data(), r.data(), kCount, 0.5f, 1234, first);
  dnn->dropout_at(a.data(), g.data(), kCount, 0.5f, 1234, first);
  EXPECT_EQ(g, r);
}

TEST_F(OneDnnVectorOps, Reductions) {
  EXPECT_NEAR(dnn->sum_squares(a.data(), kCount), ref->sum_squares(a.data(), kCount),
              1e-12 * ref->sum_squares(a.data(), kCount));
  std::vector<float> r(kCount), g(kCount);
  const double lr = ref->mse(a.data(), b.data(), r.data(), kCount, 0.5);
  const double lg = dnn->mse(a.data(), b.data(), g.data(), kCount, 0.5);
  EXPECT_NEAR(lg, lr, 1e-12 * lr);
  EXPECT_EQ(g, r);
  EXPECT_NEAR(dnn->mse(a.data(), b.data(), nullptr, kCount, 1.0), lr, 1e-12 * lr);
  EXPECT_THROW(dnn->mse(a.data(), b.data(), nullptr, 0, 1.0), Error);
}

TEST_F(OneDnnVectorOps, SoftmaxCrossEntropy) {
  const int64_t n = 3, classes = 5, spatial = 4001;
  const auto logits = random_floats(static_cast<size_t>(n * classes * spatial), 73, -4.f, 4.f);
  std::vector<int32_t> labels(static_cast<size_t>(n * spatial));
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<int32_t>((i * 7 + i / 3) % 5);
  const std::vector<float> weights{0.5f, 1.f, 2.f, 1.5f, 0.25f};
  for (const float* w : {static_cast<const float*>(nullptr), weights.data()}) {
    std::vector<float> r(logits.size()), g(logits.size());
    const double lr = ref->softmax_cross_entropy(logits.data(), labels.data(), w, 0.0, r.data(), n,
                                                 classes, spatial, 2.0);
    const double lg = dnn->softmax_cross_entropy(logits.data(), labels.data(), w, 0.0, g.data(), n,
                                                 classes, spatial, 2.0);
    EXPECT_NEAR(lg, lr, 1e-12 * lr);
    expect_close(g, r, 1e-7, "cross-entropy gradient");
    EXPECT_NEAR(dnn->softmax_cross_entropy(logits.data(), labels.data(), w, 0.0, nullptr, n,
                                           classes, spatial, 2.0),
                lr, 1e-12 * lr);
  }
  labels[4321] = 5;
  try {
    dnn->softmax_cross_entropy(logits.data(), labels.data(), nullptr, 0.0, nullptr, n, classes,
                               spatial, 1.0);
    FAIL() << "expected crest::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("label 5"), std::string::npos) << e.what();
  }
}

// Label smoothing on both paths of the loop (eight positions at a time; more classes than the
// registers hold, one by one): the reference's loss and gradient.
TEST_F(OneDnnVectorOps, SoftmaxCrossEntropyWithLabelSmoothing) {
  for (const int64_t classes : {int64_t{10}, int64_t{1000}}) {
    const int64_t n = 3, spatial = 19;
    const auto logits = random_floats(static_cast<size_t>(n * classes * spatial), 76, -5.f, 5.f);
    std::vector<int32_t> labels(static_cast<size_t>(n * spatial));
    for (size_t i = 0; i < labels.size(); ++i)
      labels[i] = static_cast<int32_t>((i * 37) % static_cast<size_t>(classes));
    std::vector<float> r(logits.size()), g(logits.size());
    const double lr = ref->softmax_cross_entropy(logits.data(), labels.data(), nullptr, 0.1,
                                                 r.data(), n, classes, spatial, 1.0);
    const double lg = dnn->softmax_cross_entropy(logits.data(), labels.data(), nullptr, 0.1,
                                                 g.data(), n, classes, spatial, 1.0);
    EXPECT_NEAR(lg, lr, 1e-12 * lr) << classes << " classes";
    expect_close(g, r, 1e-7, "smoothed cross-entropy gradient");
  }
}

// More classes than the vector loop holds in registers go one position at a time: the same
// loss and gradient.
TEST_F(OneDnnVectorOps, SoftmaxCrossEntropyWithManyClasses) {
  const int64_t n = 2, classes = 17, spatial = 37;
  const auto logits = random_floats(static_cast<size_t>(n * classes * spatial), 75, -6.f, 6.f);
  std::vector<int32_t> labels(static_cast<size_t>(n * spatial));
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<int32_t>((i * 5) % 17);
  std::vector<float> r(logits.size()), g(logits.size());
  const double lr = ref->softmax_cross_entropy(logits.data(), labels.data(), nullptr, 0.0, r.data(),
                                               n, classes, spatial, 1.0);
  const double lg = dnn->softmax_cross_entropy(logits.data(), labels.data(), nullptr, 0.0, g.data(),
                                               n, classes, spatial, 1.0);
  EXPECT_NEAR(lg, lr, 1e-12 * lr);
  expect_close(g, r, 1e-7, "cross-entropy gradient");
}

TEST_F(OneDnnVectorOps, ReductionsAreThreadCountInvariant) {
  const int64_t n = 2, classes = 4, spatial = 30011;
  const auto logits = random_floats(static_cast<size_t>(n * classes * spatial), 74);
  std::vector<int32_t> labels(static_cast<size_t>(n * spatial));
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<int32_t>(i % 4);
  auto run = [&](int threads) {
    dnn_backend->set_threads(threads);
    std::vector<double> out;
    out.push_back(dnn->sum_squares(a.data(), kCount));
    out.push_back(dnn->mse(a.data(), b.data(), nullptr, kCount, 1.0));
    out.push_back(dnn->softmax_cross_entropy(logits.data(), labels.data(), nullptr, 0.0, nullptr, n,
                                             classes, spatial, 1.0));
    return out;
  };
  const int saved = omp_get_max_threads();
  const auto one = run(1);
  const auto two = run(2);
  const auto three = run(3);
  dnn_backend->set_threads(saved);
  EXPECT_EQ(one, two);
  EXPECT_EQ(one, three);
}

// sum_squares_loop's documented order, written out in scalar code: fixed chunks, 16 running sums
// per chunk (element i of each 16-element group to sum i), the two halves added lane by lane and
// then pairwise, the tail in order, the chunks in order.
double sum_squares_in_the_documented_order(const std::vector<float>& x) {
  const size_t count = x.size();
  const size_t chunks = std::clamp<size_t>(count / onednn::kChunkMin, 1, onednn::kMaxChunks);
  double total = 0.0;
  for (size_t c = 0; c < chunks; ++c) {
    const size_t lo = count * c / chunks, hi = count * (c + 1) / chunks;
    double lanes[16] = {};
    size_t i = lo;
    for (; i + 16 <= hi; i += 16)
      for (size_t l = 0; l < 16; ++l) lanes[l] += double(x[i + l]) * double(x[i + l]);
    double p[8];
    for (size_t l = 0; l < 8; ++l) p[l] = lanes[l] + lanes[l + 8];
    double s = ((p[0] + p[4]) + (p[2] + p[6])) + ((p[1] + p[5]) + (p[3] + p[7]));
    for (; i < hi; ++i) s += double(x[i]) * double(x[i]);
    total += s;
  }
  return total;
}

// The loop runs in whichever clone this CPU selects (AVX-512, AVX2 or the baseline); equal bits to
// the scalar order mean every clone gives the same result, since each computes that order.
TEST_F(OneDnnVectorOps, SumOfSquaresFollowsItsDocumentedOrderToTheBit) {
  for (size_t n : {size_t{1}, size_t{15}, size_t{17}, size_t{4095}, kCount}) {
    const std::vector<float> x(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_EQ(dnn->sum_squares(x.data(), n), sum_squares_in_the_documented_order(x)) << n;
  }
}

TEST_F(OneDnnVectorOps, Optimizers) {
  std::vector<float> wr = a, wg = a, vr = b, vg = b;
  const auto grad = random_floats(kCount, 75);
  for (bool nesterov : {false, true}) {
    ref->sgd_keras(wr.data(), grad.data(), vr.data(), kCount, 0.01, 0.9, nesterov);
    dnn->sgd_keras(wg.data(), grad.data(), vg.data(), kCount, 0.01, 0.9, nesterov);
    EXPECT_EQ(wg, wr) << "nesterov " << nesterov;
    EXPECT_EQ(vg, vr) << "nesterov " << nesterov;
  }

  for (bool decoupled : {false, true}) {
    std::vector<float> w1 = a, w2 = a, m1(kCount, 0.f), m2(kCount, 0.f);
    std::vector<float> v1(kCount, 0.f), v2(kCount, 0.f);
    for (int64_t step = 1; step <= 3; ++step) {
      ref->adam(w1.data(), grad.data(), m1.data(), v1.data(), kCount, 1e-3, 0.9, 0.999, 1e-8, 0.01,
                decoupled, step);
      dnn->adam(w2.data(), grad.data(), m2.data(), v2.data(), kCount, 1e-3, 0.9, 0.999, 1e-8, 0.01,
                decoupled, step);
    }
    EXPECT_EQ(w2, w1) << "decoupled " << decoupled;
    EXPECT_EQ(m2, m1);
    EXPECT_EQ(v2, v1);
  }
  std::vector<float> w = a, m(kCount), v(kCount);
  EXPECT_THROW(dnn->adam(w.data(), grad.data(), m.data(), v.data(), kCount, 1e-3, 0.9, 0.999, 1e-8,
                         0.0, false, 0),
               Error);
}

// The fused pass gives the bits of the reference's and of the base class's copy-axpy-scale
// composition (the rounding LaggedGradients relied on before it was fused); one rank, whose
// previous gradient is the average, gets its own scaled gradient exactly.
TEST_F(OneDnnVectorOps, LagCorrectionIsTheCompositionBitForBit) {
  const auto average = random_floats(kCount, 76), previous = random_floats(kCount, 77);
  for (bool replace_share : {true, false}) {
    for (double own_scale : {1.0, 1.0 / 1024, 0.3}) {
      std::vector<float> g_ref = a, p_ref = previous, s_ref(kCount);
      std::vector<float> g_dnn = a, p_dnn = previous, s_dnn(kCount);
      std::vector<float> g_base = a, p_base = previous, s_base(kCount);
      ref->lag_correction(g_ref.data(), average.data(), p_ref.data(), s_ref.data(), kCount,
                          own_scale, replace_share);
      dnn->lag_correction(g_dnn.data(), average.data(), p_dnn.data(), s_dnn.data(), kCount,
                          own_scale, replace_share);
      dnn->VectorOps::lag_correction(g_base.data(), average.data(), p_base.data(), s_base.data(),
                                     kCount, own_scale, replace_share);
      const std::string where =
          "scale " + std::to_string(own_scale) + ", replace " + std::to_string(replace_share);
      EXPECT_EQ(s_dnn, a) << where;
      EXPECT_EQ(g_dnn, g_ref) << where;
      EXPECT_EQ(p_dnn, p_ref) << where;
      EXPECT_EQ(s_ref, a) << where;
      EXPECT_EQ(g_base, g_ref) << where;
      EXPECT_EQ(p_base, p_ref) << where;
      if (replace_share || own_scale != 1.0) {
        EXPECT_NE(g_dnn, a) << where;  // the update is not the gradient
      }
    }
  }
  std::vector<float> g = a, p = b, sent(kCount), scaled(kCount);
  dnn->lag_correction(g.data(), b.data(), p.data(), sent.data(), kCount, 0.25, true);
  dnn->scale(0.25, a.data(), scaled.data(), kCount);
  EXPECT_EQ(g, scaled) << "one rank: previous == average";
  EXPECT_EQ(p, scaled);
}

TEST(OneDnnBackend, Identity) {
  auto dnn = make_backend("onednn");
  EXPECT_EQ(dnn->name(), "onednn");
  EXPECT_EQ(dnn->device(), Device::cpu);
  EXPECT_TRUE(dnn->supports(DType::f32));
  EXPECT_FALSE(dnn->supports(DType::f64));
  EXPECT_FALSE(dnn->supports(DType::i32));
  // bf16 and f16 depend on the CPU's instructions: MixedPrecision.RefusedNamingThe...
  EXPECT_EQ(dnn->supports(DType::bf16), static_cast<bool>(dnn->supports_dtype(DType::bf16)));
  EXPECT_THROW(dnn->vector_ops(DType::f64), Error);
  ConvDesc d;
  d.dtype = DType::f64;
  EXPECT_THROW(dnn->conv(d, plain_format(Shape{1, 1, 1, 1, 1}, DType::f64)), Error);
}

}  // namespace
}  // namespace crest
