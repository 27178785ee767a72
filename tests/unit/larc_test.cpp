// LARC (apex.parallel.LARC) over crest's optimizers in float64 on the reference backend:
// hand-computed clip and scale steps, the clip's cap at the base learning rate, zero norms and
// exclusions leaving the gradient alone, the weight decay taken over from the base, and the
// state (the base optimizer's, plus the gradient sum) with the step count passed on to the base.
// PyTorch parity over SGD and Adam: lars_parity_test.cpp.
#include "crest/optim/larc.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "crest/core/error.hpp"
#include "support/param_slots.hpp"

namespace crest {
namespace {

using test::flat_slot;

std::unique_ptr<Optimizer> sgd() { return std::make_unique<SgdKeras>(0.0); }
std::unique_ptr<Optimizer> adam() { return std::make_unique<Adam>(0.9, 0.999, 1e-8, 0.0, false); }

// One tensor w = [3, 4] (norm 5), g = [0.6, 0.8] (norm 1) under LARC over plain SGD (momentum
// 0: w = w - lr g'), eta 0.02, eps 0, wd 0.01: a = 0.02 * 5 / (1 + 0.05) = 0.0952...;
// g' = a (g + 0.01 w) = a [0.63, 0.84].
struct OneTensor {
  std::unique_ptr<Backend> backend = make_backend("reference");
  ParamStore ps{{flat_slot("w", 2)}, DType::f64, *backend};
  double* w = ps.value(0).as<double>();
  double* g = ps.grad(0).as<double>();
  OneTensor() { w[0] = 3, w[1] = 4, g[0] = 0.6, g[1] = 0.8; }
};

constexpr double kA = 0.1 / 1.05;

TEST(Larc, ScaleModeMultipliesTheDecayedGradientByTheTrustRatio) {
  OneTensor t;
  Larc larc(sgd(),
            {.mode = LarcMode::scale, .trust_coefficient = 0.02, .eps = 0, .weight_decay = 0.01});
  larc.attach(t.ps, t.ps.ops());
  larc.step(0.5);
  EXPECT_DOUBLE_EQ(larc.last_factors()[0], kA);
  EXPECT_DOUBLE_EQ(t.g[0], kA * 0.63);  // left in the gradient buffer, as apex leaves p.grad
  EXPECT_DOUBLE_EQ(t.w[0], 3 - 0.5 * kA * 0.63);
  EXPECT_DOUBLE_EQ(t.w[1], 4 - 0.5 * kA * 0.84);
  EXPECT_EQ(larc.name(), "larc(sgd)");
}

// Clip: the factor is min(a / lr, 1). With lr 0.5 that is a / 0.5 (the tensor's rate becomes
// a); with lr 0.05 < a it is 1 (the rate stays lr) but the decay is still added.
TEST(Larc, ClipModeCapsTheRateAtTheBaseLearningRate) {
  for (const double lr : {0.5, 0.05}) {
    OneTensor t;
    Larc larc(sgd(),
              {.mode = LarcMode::clip, .trust_coefficient = 0.02, .eps = 0, .weight_decay = 0.01});
    larc.attach(t.ps, t.ps.ops());
    larc.step(lr);
    const double factor = std::min(kA / lr, 1.0);
    EXPECT_DOUBLE_EQ(larc.last_factors()[0], factor) << lr;
    EXPECT_DOUBLE_EQ(t.w[1], 4 - lr * factor * 0.84) << lr;
  }
  EXPECT_DOUBLE_EQ(std::min(kA / 0.05, 1.0), 1.0);  // the second case really clips
}

// apex leaves a tensor with a zero norm alone: no rescaling and no weight decay. Excluded
// tensors (the default patterns: *.bias) likewise.
TEST(Larc, ZeroNormsAndExclusionsKeepTheGradient) {
  auto backend = make_backend("reference");
  ParamStore ps({flat_slot("zero.weight", 2), flat_slot("no_grad.weight", 2),
                 flat_slot("fc.bias", 2), flat_slot("fc.weight", 2)},
                DType::f64, *backend);
  auto set = [&](size_t s, double w0, double w1, double g0, double g1) {
    ps.value(s).as<double>()[0] = w0, ps.value(s).as<double>()[1] = w1;
    ps.grad(s).as<double>()[0] = g0, ps.grad(s).as<double>()[1] = g1;
  };
  set(0, 0, 0, 0.3, -0.4);
  set(1, 1, 2, 0, 0);
  set(2, 1, 2, 0.3, -0.4);
  set(3, 1, 2, 0.3, -0.4);
  Larc larc(sgd(), {.mode = LarcMode::scale, .weight_decay = 0.1});
  larc.attach(ps, ps.ops());
  EXPECT_EQ(larc.tensors().excluded(), std::vector<size_t>{2});
  larc.step(0.1);
  EXPECT_EQ(larc.last_factors(), (std::vector<double>{1.0, 1.0, larc.last_factors()[2]}));
  EXPECT_LT(larc.last_factors()[2], 0.1);
  for (size_t s : {size_t{0}, size_t{2}}) {  // the plain SGD step on the untouched gradient
    EXPECT_EQ(ps.grad(s).as<double>()[0], 0.3) << s;
    EXPECT_DOUBLE_EQ(ps.value(s).as<double>()[0], (s == 0 ? 0.0 : 1.0) - 0.1 * 0.3) << s;
  }
  EXPECT_EQ(ps.value(1).as<double>()[1], 2.0);  // no gradient, no decay: it stays
  EXPECT_NE(ps.grad(3).as<double>()[0], 0.3);
}

// The state is the base optimizer's, then the gradient sum, which belongs to the wrapper (the
// trainer accumulates into the optimizer it holds). A restored step count reaches the base
// (Adam's bias correction).
TEST(Larc, StateIsTheBaseOptimizersAndStepsReachIt) {
  auto backend = make_backend("reference");
  ParamStore ps({flat_slot("a.weight", 3), flat_slot("a.bias", 3)}, DType::f64, *backend);
  Larc larc(adam(), {});
  larc.attach(ps, ps.ops(), /*accumulation=*/2);
  EXPECT_EQ(larc.name(), "larc(adam)");
  auto state = larc.state();
  ASSERT_EQ(state.size(), 3u);
  EXPECT_EQ(state[0].first, "m");
  EXPECT_EQ(state[1].first, "v");
  EXPECT_EQ(state[2].first, "gradient_sum");
  EXPECT_EQ(larc.gradient_sum(), state[2].second->data());
  EXPECT_NE(state[0].second->data(), state[2].second->data());
  larc.set_steps_taken(5);
  ps.value(0).as<double>()[0] = 1.0;
  ps.grad(0).as<double>()[0] = 0.5;
  larc.step(1e-3);
  EXPECT_EQ(larc.steps_taken(), 6);
  EXPECT_EQ(larc.base().steps_taken(), 6);
}

// Adam under LARC: the base sees the rescaled gradient with no decay of its own. One element
// w = 2, g = 0.5, scale mode, eta 0.02, eps 0, wd 0.01: g' = a (0.5 + 0.02),
// a = 0.02 * 2 / (0.5 + 0.02); Adam's first step moves w by lr * g' / (|g'| + 1e-8).
TEST(Larc, OverAdamTheBaseStepsOnTheRescaledGradient) {
  auto backend = make_backend("reference");
  ParamStore ps({flat_slot("w", 1)}, DType::f64, *backend);
  ps.value(0).as<double>()[0] = 2.0;
  ps.grad(0).as<double>()[0] = 0.5;
  Larc larc(adam(),
            {.mode = LarcMode::scale, .trust_coefficient = 0.02, .eps = 0, .weight_decay = 0.01});
  larc.attach(ps, ps.ops());
  larc.step(0.1);
  const double a = 0.04 / 0.52, g = a * 0.52;
  EXPECT_DOUBLE_EQ(larc.last_factors()[0], a);
  EXPECT_NEAR(ps.value(0).as<double>()[0], 2.0 - 0.1 * g / (g + 1e-8), 1e-15);
}

TEST(Larc, RefusesImpossibleSettings) {
  EXPECT_THROW(Larc(nullptr, {}), Error);
  EXPECT_THROW(Larc(sgd(), {.trust_coefficient = -1}), Error);
  EXPECT_THROW(Larc(sgd(), {.eps = -1}), Error);
  EXPECT_THROW(Larc(sgd(), {.weight_decay = -0.1}), Error);
  Larc unattached(sgd(), {});
  EXPECT_THROW(unattached.step(0.1), Error);
}

}  // namespace
}  // namespace crest
