// crest's Adam and AdamW against torch.optim.Adam (weight decay added to the gradient) and
// torch.optim.AdamW (decoupled: p *= 1 - lr wd first), written here in torch's own arithmetic
// (step_size = lr / bias_correction1, denom = sqrt(v) / sqrt(bias_correction2) + eps), over
// several steps with a changing learning rate and the DeepCAM reference's eps 1e-6, in float64 on
// the reference backend. Non-trainable slots are never touched.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "crest/optim/optimizer.hpp"
#include "support/param_slots.hpp"

namespace crest {
namespace {

using test::flat_slot;

struct TorchAdam {
  double b1, b2, eps, wd;
  bool decoupled;
  std::vector<double> w, m, v;
  int64_t t = 0;
  void step(const std::vector<double>& g, double lr) {
    ++t;
    const double bc1 = 1 - std::pow(b1, t), bc2 = 1 - std::pow(b2, t);
    for (size_t i = 0; i < w.size(); ++i) {
      double grad = g[i];
      if (decoupled)
        w[i] *= 1 - lr * wd;
      else
        grad += wd * w[i];
      m[i] = b1 * m[i] + (1 - b1) * grad;
      v[i] = b2 * v[i] + (1 - b2) * grad * grad;
      const double denom = std::sqrt(v[i]) / std::sqrt(bc2) + eps;
      w[i] -= (lr / bc1) * m[i] / denom;
    }
  }
};

void check(bool decoupled) {
  auto backend = make_backend("reference");
  ParamStore ps({flat_slot("a", 6), flat_slot("stats", 3, false), flat_slot("b", 4)}, DType::f64,
                *backend);
  std::mt19937_64 gen(3);
  std::uniform_real_distribution<double> u(-1, 1);
  const auto trainable = [&ps](size_t s) { return ps.slots()[s].spec.trainable; };
  for (size_t s = 0; s < ps.slots().size(); ++s)
    for (size_t i = 0; i < ps.slots()[s].count; ++i) ps.value(s).as<double>()[i] = u(gen);
  const double wd = 0.05, eps = 1e-6;
  std::vector<TorchAdam> ref;
  for (size_t s = 0; s < ps.slots().size(); ++s)
    if (trainable(s)) {
      const double* w = ps.value(s).as<double>();
      const size_t n = ps.slots()[s].count;
      ref.push_back({0.9, 0.999, eps, wd, decoupled, std::vector<double>(w, w + n),
                     std::vector<double>(n, 0.0), std::vector<double>(n, 0.0)});
    }
  const int stats = ps.find("stats");
  const std::vector<double> before(ps.value(stats).as<double>(), ps.value(stats).as<double>() + 3);
  Adam adam(0.9, 0.999, eps, wd, decoupled);
  adam.attach(ps, ps.ops());
  for (double lr : {1e-3, 3e-3, 5e-4, 2e-3}) {
    size_t t = 0;
    for (size_t s = 0; s < ps.slots().size(); ++s) {
      double* g = ps.grad(s).as<double>();
      std::vector<double> grad(ps.slots()[s].count);
      for (double& x : grad) x = u(gen);
      std::copy(grad.begin(), grad.end(), g);
      if (trainable(s)) ref[t++].step(grad, lr);
    }
    adam.step(lr);
  }
  size_t t = 0;
  for (size_t s = 0; s < ps.slots().size(); ++s) {
    if (!trainable(s)) continue;
    for (size_t i = 0; i < ps.slots()[s].count; ++i)
      EXPECT_NEAR(ps.value(s).as<double>()[i], ref[t].w[i], 1e-14)
          << ps.slots()[s].name << "[" << i << "] decoupled " << decoupled;
    ++t;
  }
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(ps.value(stats).as<double>()[i], before[i]);
  EXPECT_EQ(adam.name(), decoupled ? "adamw" : "adam");
}

TEST(AdamAsTorch, AdamAddsTheWeightDecayToTheGradient) { check(false); }
TEST(AdamAsTorch, AdamWDecaysTheWeightFirst) { check(true); }

}  // namespace
}  // namespace crest
