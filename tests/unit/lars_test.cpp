// LARS (timm's Lars, always adapting) in float64 on the reference backend: an independent
// per-tensor oracle over three steps with a changing learning rate, a hand-computed step, the
// exclusions (default patterns, a user's list, an unmatched pattern), zero norms, and
// non-trainable slots never touched. PyTorch parity: lars_parity_test.cpp.
#include "crest/optim/lars.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "crest/core/error.hpp"
#include "support/param_slots.hpp"

namespace crest {
namespace {

using test::flat_slot;

// A small model's tensors: two adapted weights, a bias and a batch-norm scale (excluded by the
// defaults), running statistics (not trainable) and a weight that starts at zero.
struct Fixture {
  std::unique_ptr<Backend> backend = make_backend("reference");
  ParamStore params{{flat_slot("conv1.weight", 6), flat_slot("conv1.bias", 3),
                     flat_slot("bn1.bn.weight", 4), flat_slot("bn1.bn.running_mean", 4, false),
                     flat_slot("fc1.weight", 5), flat_slot("zero.weight", 2)},
                    DType::f64,
                    *backend};
  double* w(size_t s) { return params.value(s).as<double>(); }
  double* g(size_t s) { return params.grad(s).as<double>(); }
  size_t n(size_t s) { return params.slots()[s].count; }
  size_t at(const char* name) { return static_cast<size_t>(params.find(name)); }

  void fill(uint64_t seed, bool weights) {
    std::mt19937_64 gen(seed);
    std::uniform_real_distribution<double> u(-1, 1);
    for (size_t s = 0; s < params.slots().size(); ++s)
      for (size_t i = 0; i < n(s); ++i) {
        if (weights) w(s)[i] = params.slots()[s].name == "zero.weight" ? 0.0 : u(gen);
        g(s)[i] = 0.1 * u(gen);
      }
  }
};

double norm(const double* x, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += x[i] * x[i];
  return std::sqrt(s);
}

// timm's Lars step for one tensor (always_adapt; excluded: ratio 1, wd 0).
void oracle_step(std::vector<double>& w, std::vector<double>& buf, const double* g, double lr,
                 double m, double eta, double wd, double eps, bool excluded) {
  const double wn = norm(w.data(), w.size()), gn = norm(g, w.size());
  double ratio = 1.0;
  if (excluded)
    wd = 0;
  else if (wn > 0 && gn > 0)
    ratio = eta * wn / (gn + wd * wn + eps);
  for (size_t i = 0; i < w.size(); ++i) {
    buf[i] = m * buf[i] + ratio * (g[i] + wd * w[i]);
    w[i] -= lr * buf[i];
  }
}

TEST(Lars, MatchesTimmsLarsPerTensorOverThreeSteps) {
  Fixture f;
  f.fill(3, true);
  const LarsOptions o{
      .momentum = 0.9, .trust_coefficient = 0.02, .eps = 1e-8, .weight_decay = 5e-3};
  Lars lars(o);
  lars.attach(f.params, f.params.ops());
  const size_t running = f.at("bn1.bn.running_mean");
  const std::vector<double> stats(f.w(running), f.w(running) + 4);
  std::vector<std::vector<double>> w, buf;
  for (size_t s = 0; s < f.params.slots().size(); ++s) {
    w.emplace_back(f.w(s), f.w(s) + f.n(s));
    buf.emplace_back(f.n(s), 0.0);
  }
  const double lrs[] = {0.5, 0.25, 1.0};
  for (int k = 0; k < 3; ++k) {
    if (k > 0) f.fill(10 + k, false);
    for (size_t s = 0; s < f.params.slots().size(); ++s) {
      if (!f.params.slots()[s].spec.trainable) continue;
      const std::string& name = f.params.slots()[s].name;
      const bool excluded = name == "conv1.bias" || name == "bn1.bn.weight";
      oracle_step(w[s], buf[s], f.g(s), lrs[k], o.momentum, o.trust_coefficient, o.weight_decay,
                  o.eps, excluded);
    }
    lars.step(lrs[k]);
    for (size_t s = 0; s < f.params.slots().size(); ++s) {
      if (!f.params.slots()[s].spec.trainable) continue;
      for (size_t i = 0; i < f.n(s); ++i)
        EXPECT_NEAR(f.w(s)[i], w[s][i], 1e-15 * (1 + std::abs(w[s][i])))
            << f.params.slots()[s].name << "[" << i << "] step " << k + 1;
    }
  }
  EXPECT_EQ(lars.steps_taken(), 3);
  EXPECT_EQ(std::vector<double>(f.w(running), f.w(running) + 4), stats);
  auto state = lars.state();
  ASSERT_EQ(state.size(), 1u);
  EXPECT_EQ(state[0].first, "momentum_buffer");
}

// The MLPerf ResNet-50 TF2 reference's LARSOptimizer step for one tensor (skipped: the rate
// unscaled and no decay): v = m v - lr r (g + wd w); w = w + v.
void tf_reference_step(std::vector<double>& w, std::vector<double>& v, const double* g, double lr,
                       double m, double eta, double wd, double eps, bool skipped) {
  double scaled_lr = lr;
  std::vector<double> grad(g, g + w.size());
  if (!skipped) {
    const double wn = norm(w.data(), w.size()), gn = norm(g, w.size());
    const double trust = wn > 0 ? (gn > 0 ? eta * wn / (gn + wd * wn + eps) : 1.0) : 1.0;
    scaled_lr = lr * trust;
    for (size_t i = 0; i < w.size(); ++i) grad[i] += wd * w[i];
  }
  for (size_t i = 0; i < w.size(); ++i) {
    v[i] = v[i] * m - grad[i] * scaled_lr;
    w[i] += v[i];
  }
}

// Warmup and decay change the rate every step: there the Keras form (the rate inside the
// momentum) and the torch form take different steps, and the Keras form must take the
// reference's. Four steps, rates rising then falling, on adapted, excluded and zero tensors.
TEST(Lars, KerasFormMatchesTheTfReferenceOverAChangingRate) {
  Fixture f;
  f.fill(5, true);
  const LarsOptions o{.momentum = 0.9,
                      .trust_coefficient = 0.02,
                      .eps = 1e-7,
                      .weight_decay = 5e-3,
                      .momentum_form = LarsMomentumForm::keras};
  Lars lars(o);
  lars.attach(f.params, f.params.ops());
  std::vector<std::vector<double>> w, v;
  for (size_t s = 0; s < f.params.slots().size(); ++s) {
    w.emplace_back(f.w(s), f.w(s) + f.n(s));
    v.emplace_back(f.n(s), 0.0);
  }
  const size_t fc1 = f.at("fc1.weight");
  const std::vector<double> fc1_start = w[fc1];
  double torch_form_gap = 0;
  const double lrs[] = {0.1, 0.4, 0.8, 0.2};
  for (int k = 0; k < 4; ++k) {
    if (k > 0) f.fill(20 + k, false);
    for (size_t s = 0; s < f.params.slots().size(); ++s) {
      if (!f.params.slots()[s].spec.trainable) continue;
      const std::string& name = f.params.slots()[s].name;
      tf_reference_step(w[s], v[s], f.g(s), lrs[k], o.momentum, o.trust_coefficient, o.weight_decay,
                        o.eps, name == "conv1.bias" || name == "bn1.bn.weight");
    }
    lars.step(lrs[k]);
    for (size_t s = 0; s < f.params.slots().size(); ++s) {
      if (!f.params.slots()[s].spec.trainable) continue;
      for (size_t i = 0; i < f.n(s); ++i)
        EXPECT_NEAR(f.w(s)[i], w[s][i], 1e-14 * (1 + std::abs(w[s][i])))
            << f.params.slots()[s].name << "[" << i << "] step " << k + 1;
    }
  }
  // The same four steps in torch's form land elsewhere (the test would pass a torch-form update
  // only if the forms agreed under a changing rate).
  Fixture t;
  t.fill(5, true);
  Lars torch_form({.momentum = 0.9, .trust_coefficient = 0.02, .eps = 1e-7, .weight_decay = 5e-3});
  torch_form.attach(t.params, t.params.ops());
  for (int k = 0; k < 4; ++k) {
    if (k > 0) t.fill(20 + k, false);
    torch_form.step(lrs[k]);
  }
  for (size_t i = 0; i < f.n(fc1); ++i)
    torch_form_gap = std::max(torch_form_gap, std::abs(t.w(fc1)[i] - f.w(fc1)[i]));
  EXPECT_GT(torch_form_gap, 1e-6) << "moved " << std::abs(f.w(fc1)[0] - fc1_start[0]);
  auto state = lars.state();
  ASSERT_EQ(state.size(), 1u);
  EXPECT_EQ(state[0].first, "momentum") << "a torch-form checkpoint must not resume in this form";
}

// w = [3, 4] (norm 5), g = [0.6, 0.8] (norm 1), eta 0.001, wd 0.01, eps 0:
// r = 0.001 * 5 / (1 + 0.05); d = r (g + 0.01 w) = r [0.63, 0.84]; w = w - lr d.
TEST(Lars, HandComputedStep) {
  auto backend = make_backend("reference");
  ParamStore ps({flat_slot("w", 2)}, DType::f64, *backend);
  double* w = ps.value(0).as<double>();
  double* g = ps.grad(0).as<double>();
  w[0] = 3, w[1] = 4, g[0] = 0.6, g[1] = 0.8;
  Lars lars({.momentum = 0.9, .trust_coefficient = 0.001, .eps = 0, .weight_decay = 0.01});
  lars.attach(ps, ps.ops());
  lars.step(2.0);
  const double r = 0.005 / 1.05;
  ASSERT_EQ(lars.last_trust_ratios().size(), 1u);
  EXPECT_DOUBLE_EQ(lars.last_trust_ratios()[0], r);
  EXPECT_DOUBLE_EQ(w[0], 3 - 2.0 * r * 0.63);
  EXPECT_DOUBLE_EQ(w[1], 4 - 2.0 * r * 0.84);
  const double* buf = static_cast<const double*>(lars.state()[0].second->data());
  EXPECT_DOUBLE_EQ(buf[1], r * 0.84);
  // The gradient is only read.
  EXPECT_EQ(g[0], 0.6);
}

// The default patterns exclude the bias and the batch-norm scale; an excluded tensor takes the
// plain step w - lr g (no ratio, no decay) and an adapted one does not.
TEST(Lars, ExclusionsTakeEffect) {
  Fixture f;
  f.fill(5, true);
  Lars lars({.momentum = 0.9, .trust_coefficient = 0.001, .weight_decay = 0.1});
  lars.attach(f.params, f.params.ops());
  std::vector<size_t> excluded{f.at("conv1.bias"), f.at("bn1.bn.weight")};
  EXPECT_EQ(lars.tensors().excluded(), excluded);
  EXPECT_EQ(lars.tensors().adapted(),
            (std::vector<size_t>{f.at("conv1.weight"), f.at("fc1.weight"), f.at("zero.weight")}));
  std::vector<std::vector<double>> before;
  for (size_t s = 0; s < f.params.slots().size(); ++s) before.emplace_back(f.w(s), f.w(s) + f.n(s));
  lars.step(0.1);
  for (size_t s : excluded)
    for (size_t i = 0; i < f.n(s); ++i) EXPECT_EQ(f.w(s)[i], before[s][i] - 0.1 * f.g(s)[i]);
  const size_t conv = f.at("conv1.weight");
  EXPECT_LT(lars.last_trust_ratios()[0], 0.1);  // eta ||w|| / ||g||: about 0.001 * 10
  EXPECT_NE(f.w(conv)[0], before[conv][0] - 0.1 * f.g(conv)[0]);

  // A user's list replaces the defaults: here only the bias is left alone.
  Fixture f2;
  f2.fill(5, true);
  LarsExclusions only_bias{.patterns = {"*.bias"}, .every_pattern_matches = true};
  Lars lars2({.exclude = only_bias});
  lars2.attach(f2.params, f2.params.ops());
  EXPECT_EQ(lars2.tensors().excluded(), std::vector<size_t>{f2.at("conv1.bias")});
  // An empty list adapts everything trainable.
  Lars lars3({.exclude = {.patterns = {}, .every_pattern_matches = true}});
  lars3.attach(f2.params, f2.params.ops());
  EXPECT_TRUE(lars3.tensors().excluded().empty());
  EXPECT_EQ(lars3.tensors().adapted().size(), 5u);
}

// A pattern the user wrote that matches nothing is refused, naming the key and the pattern; the
// defaults may match nothing (this model has no batch norm).
TEST(Lars, UnmatchedPatternIsAnErrorNamingTheKey) {
  auto backend = make_backend("reference");
  ParamStore ps(
      {flat_slot("fc1.weight", 3), flat_slot("fc1.bias", 3), flat_slot("bn.running_var", 3, false)},
      DType::f64, *backend);
  Lars lenient({});
  EXPECT_NO_THROW(lenient.attach(ps, ps.ops()));        // *.bn.weight matches nothing: fine
  for (const char* bad : {"*.bais", "*running_var"}) {  // a typo; a non-trainable tensor
    Lars lars({.exclude = {.patterns = {"*.bias", bad}, .every_pattern_matches = true}});
    try {
      lars.attach(ps, ps.ops());
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), 2);
      const std::string m = e.what();
      EXPECT_NE(m.find("optimizer.lars_exclude"), std::string::npos) << m;
      EXPECT_NE(m.find(std::string("'") + bad + "'"), std::string::npos) << m;
      EXPECT_NE(m.find("fc1.weight, fc1.bias"), std::string::npos) << m;
    }
  }
}

// A zero weight has no scale: ratio 1, so it moves by lr (g + wd * 0) = lr g. A zero gradient
// also gives ratio 1: only the decay moves the tensor (timm adds it whatever the norms).
TEST(Lars, ZeroNormsGiveRatioOne) {
  auto backend = make_backend("reference");
  ParamStore ps({flat_slot("zero.weight", 2), flat_slot("still.weight", 2)}, DType::f64, *backend);
  ps.grad(0).as<double>()[0] = 0.3;
  ps.grad(0).as<double>()[1] = -0.4;
  ps.value(1).as<double>()[0] = 2.0;
  Lars lars({.momentum = 0.5, .trust_coefficient = 0.001, .weight_decay = 0.01});
  lars.attach(ps, ps.ops());
  lars.step(0.1);
  EXPECT_EQ(lars.last_trust_ratios(), (std::vector<double>{1.0, 1.0}));
  EXPECT_DOUBLE_EQ(ps.value(0).as<double>()[0], -0.03);
  EXPECT_DOUBLE_EQ(ps.value(0).as<double>()[1], 0.04);
  EXPECT_DOUBLE_EQ(ps.value(1).as<double>()[0], 2.0 - 0.1 * 0.01 * 2.0);
  EXPECT_EQ(ps.value(1).as<double>()[1], 0.0);
}

TEST(Lars, RefusesImpossibleSettings) {
  EXPECT_THROW(Lars({.trust_coefficient = 0}), Error);
  EXPECT_THROW(Lars({.eps = -1e-8}), Error);
  EXPECT_THROW(Lars({.weight_decay = -1}), Error);
  EXPECT_THROW(Lars({.momentum = 1.0}), Error);
  Lars unattached({});
  EXPECT_THROW(unattached.step(0.1), Error);
}

}  // namespace
}  // namespace crest
