// LAMB on the onednn backend: its f32 lamb_direction gives the reference backend's bits (both
// compute in double and round once), for every thread count; the fused direction-and-norms pass
// gives the separate passes' bits; a whole Lamb step on a parameter
// store agrees with the reference backend's to float rounding (the norms are summed in another
// order).
#include <gtest/gtest.h>

#include <cmath>

#include "backend/backend_test_util.hpp"
#include "crest/core/error.hpp"
#include "crest/optim/lamb.hpp"

namespace crest {
namespace {

using testing::random_floats;

constexpr size_t kCount = 100'003;  // the parallel path

TEST(OneDnnLamb, DirectionIsBitExactWithTheReference) {
  auto ref_backend = make_backend("reference");
  auto dnn_backend = make_backend("onednn");
  auto ref = ref_backend->vector_ops(DType::f32);
  auto dnn = dnn_backend->vector_ops(DType::f32);
  const auto w = random_floats(kCount, 81);
  const auto grad = random_floats(kCount, 82, -3.f, 3.f);
  for (int threads : {1, 2}) {
    dnn_backend->set_threads(threads);
    std::vector<float> g1(kCount), g2(kCount), m1(kCount, 0.f), m2(kCount, 0.f), v1(kCount, 0.f),
        v2(kCount, 0.f);
    for (int64_t step = 1; step <= 3; ++step) {
      std::copy(grad.begin(), grad.end(), g1.begin());
      std::copy(grad.begin(), grad.end(), g2.begin());
      ref->lamb_direction(w.data(), g1.data(), m1.data(), v1.data(), kCount, 2.5, 0.9, 0.999, 1e-6,
                          0.01, step);
      dnn->lamb_direction(w.data(), g2.data(), m2.data(), v2.data(), kCount, 2.5, 0.9, 0.999, 1e-6,
                          0.01, step);
    }
    EXPECT_EQ(g2, g1) << threads << " threads";
    EXPECT_EQ(m2, m1);
    EXPECT_EQ(v2, v1);
  }
  std::vector<float> g(grad.begin(), grad.end()), m(kCount), v(kCount);
  EXPECT_THROW(dnn->lamb_direction(w.data(), g.data(), m.data(), v.data(), kCount, 1.0, 0.9, 0.999,
                                   1e-6, 0.0, 0),
               Error);
  EXPECT_THROW(dnn->lamb_direction(w.data(), g.data(), m.data(), v.data(), kCount, 0.0, 0.9, 0.999,
                                   1e-6, 0.0, 1),
               Error);
}

// The fused pass (direction and both norms in one sweep) gives the bits of lamb_direction and
// two sum_squares after it, for every thread count and for lengths with and without a tail of
// fewer than 16 elements, in one chunk and in many.
TEST(OneDnnLamb, DirectionWithNormsEqualsTheSeparatePasses) {
  auto backend = make_backend("onednn");
  auto ops = backend->vector_ops(DType::f32);
  for (size_t count : {size_t{37}, size_t{16} * 5, kCount, size_t{1} << 20}) {
    const auto w = random_floats(count, 91);
    const auto grad = random_floats(count, 92, -3.f, 3.f);
    for (int threads : {1, 2}) {
      backend->set_threads(threads);
      std::vector<float> g1(grad.begin(), grad.end()), g2 = g1;
      std::vector<float> m1(count, 0.25f), m2 = m1, v1(count, 0.5f), v2 = v1;
      ops->lamb_direction(w.data(), g1.data(), m1.data(), v1.data(), count, 1.5, 0.9, 0.999, 1e-6,
                          0.01, 2);
      const double w_squares = ops->sum_squares(w.data(), count);
      const double u_squares = ops->sum_squares(g1.data(), count);
      const VectorOps::SquareSums fused = ops->lamb_direction_with_norms(
          w.data(), g2.data(), m2.data(), v2.data(), count, 1.5, 0.9, 0.999, 1e-6, 0.01, 2);
      EXPECT_EQ(g2, g1) << count << " elements, " << threads << " threads";
      EXPECT_EQ(m2, m1);
      EXPECT_EQ(v2, v1);
      EXPECT_EQ(fused.w, w_squares) << count << " elements, " << threads << " threads";
      EXPECT_EQ(fused.u, u_squares) << count << " elements, " << threads << " threads";
    }
  }
  std::vector<float> w(16, 1.f), g(16, 1.f), m(16), v(16);
  EXPECT_THROW(ops->lamb_direction_with_norms(w.data(), g.data(), m.data(), v.data(), 16, 1.0, 0.9,
                                              0.999, 1e-6, 0.0, 0),
               Error);
}

ParamSlot slot(const std::string& name, int64_t n, bool trainable = true) {
  ParamSlot s;
  s.name = name;
  s.shape = Shape{n};
  s.spec.trainable = trainable;
  return s;
}

TEST(OneDnnLamb, StepAgreesWithTheReferenceBackend) {
  auto ref_backend = make_backend("reference");
  auto dnn_backend = make_backend("onednn");
  const std::vector<ParamSlot> slots{slot("big", 70'000), slot("stats", 64, false),
                                     slot("bias", 64), slot("mid", 5'000)};
  ParamStore a(slots, DType::f32, *ref_backend), b(slots, DType::f32, *dnn_backend);
  for (size_t s = 0; s < slots.size(); ++s) {
    const size_t n = a.slots()[s].count;
    const auto w = random_floats(n, 90 + static_cast<uint32_t>(s));
    std::copy(w.begin(), w.end(), a.value(s).as<float>());
    std::copy(w.begin(), w.end(), b.value(s).as<float>());
  }
  Lamb la{LambOptions{}}, lb{LambOptions{}};
  la.attach(a, a.ops());
  lb.attach(b, b.ops());
  for (int step = 0; step < 3; ++step) {
    for (size_t s = 0; s < slots.size(); ++s) {
      const size_t n = a.slots()[s].count;
      const auto g = random_floats(n, 100 + static_cast<uint32_t>(10 * step + s), -0.02f, 0.02f);
      std::copy(g.begin(), g.end(), a.grad(s).as<float>());
      std::copy(g.begin(), g.end(), b.grad(s).as<float>());
    }
    la.step(1e-2);
    lb.step(1e-2);
    EXPECT_NEAR(lb.last_gradient_norm(), la.last_gradient_norm(), 1e-6 * la.last_gradient_norm());
  }
  for (size_t s = 0; s < slots.size(); ++s) {
    double worst = 0;
    for (size_t i = 0; i < a.slots()[s].count; ++i)
      worst = std::max(
          worst, std::abs(double(a.value(s).as<float>()[i]) - double(b.value(s).as<float>()[i])));
    EXPECT_LT(worst, 1e-6) << a.slots()[s].name;
  }
}

}  // namespace
}  // namespace crest
