// LAMB against an independent per-tensor oracle written the way the peer's `lamb_step`
// (shared/peers/deepcam_torch.py, apex FusedLAMB semantics) computes it, in float64 on the
// reference backend; hand-computed single-element steps; the trust ratio only with weight decay;
// zero norms; and non-trainable slots never touched.
#include "crest/optim/lamb.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "crest/core/error.hpp"
#include "support/counting_backend.hpp"
#include "support/param_slots.hpp"

namespace crest {
namespace {

using test::flat_slot;

// A store of three trainable tensors and a non-trainable one (given second: the store moves it
// behind the trainable ones), in float64 on the reference backend.
struct Fixture {
  std::unique_ptr<Backend> backend = make_backend("reference");
  ParamStore params{
      {flat_slot("a", 5), flat_slot("running", 4, false), flat_slot("b", 3), flat_slot("c", 7)},
      DType::f64,
      *backend};
  double* w(size_t s) { return params.value(s).as<double>(); }
  double* g(size_t s) { return params.grad(s).as<double>(); }
  size_t n(size_t s) { return params.slots()[s].count; }
  bool trainable(size_t s) { return params.slots()[s].spec.trainable; }

  void fill(uint64_t seed, double grad_scale) {
    std::mt19937_64 gen(seed);
    std::uniform_real_distribution<double> u(-1, 1);
    for (size_t s = 0; s < params.slots().size(); ++s)
      for (size_t i = 0; i < n(s); ++i) {
        w(s)[i] = u(gen);
        g(s)[i] = grad_scale * u(gen);
      }
  }
  void set_grads(uint64_t seed, double grad_scale) {
    std::mt19937_64 gen(seed);
    std::uniform_real_distribution<double> u(-1, 1);
    for (size_t s = 0; s < params.slots().size(); ++s)
      for (size_t i = 0; i < n(s); ++i) g(s)[i] = grad_scale * u(gen);
  }
};

// The peer's lamb_step, tensor by tensor, on plain vectors.
struct OracleTensor {
  std::vector<double> w, m, v;
};

double norm(const std::vector<double>& x) {
  double s = 0;
  for (double e : x) s += e * e;
  return std::sqrt(s);
}

double oracle_step(std::vector<OracleTensor>& ts, const std::vector<std::vector<double>>& grads,
                   double lr, int64_t step, double wd, double max_norm = 1.0, double b1 = 0.9,
                   double b2 = 0.999, double eps = 1e-6) {
  double squares = 0;
  for (const auto& g : grads) squares += norm(g) * norm(g);
  const double gnorm = std::sqrt(squares);
  const double clip = gnorm > max_norm ? gnorm / max_norm : 1.0;
  const double bc1 = 1 - std::pow(b1, step), bc2 = 1 - std::pow(b2, step);
  for (size_t t = 0; t < ts.size(); ++t) {
    OracleTensor& p = ts[t];
    std::vector<double> u(p.w.size());
    for (size_t i = 0; i < u.size(); ++i) {
      const double g = grads[t][i] / clip;
      p.m[i] = b1 * p.m[i] + (1 - b1) * g;
      p.v[i] = b2 * p.v[i] + (1 - b2) * g * g;
      u[i] = (p.m[i] / bc1) / (std::sqrt(p.v[i] / bc2) + eps);
    }
    double ratio = lr;
    if (wd != 0) {
      for (size_t i = 0; i < u.size(); ++i) u[i] += wd * p.w[i];
      const double pn = norm(p.w), un = norm(u);
      ratio = pn != 0 && un != 0 ? lr * pn / un : lr;
    }
    for (size_t i = 0; i < u.size(); ++i) p.w[i] -= ratio * u[i];
  }
  return gnorm;
}

std::vector<OracleTensor> oracle_of(Fixture& f) {
  std::vector<OracleTensor> ts;
  for (size_t s = 0; s < f.params.slots().size(); ++s)
    if (f.trainable(s))
      ts.push_back({std::vector<double>(f.w(s), f.w(s) + f.n(s)), std::vector<double>(f.n(s), 0.0),
                    std::vector<double>(f.n(s), 0.0)});
  return ts;
}

std::vector<std::vector<double>> grads_of(Fixture& f) {
  std::vector<std::vector<double>> gs;
  for (size_t s = 0; s < f.params.slots().size(); ++s)
    if (f.trainable(s)) gs.emplace_back(f.g(s), f.g(s) + f.n(s));
  return gs;
}

void expect_weights(Fixture& f, const std::vector<OracleTensor>& ts, double tol) {
  size_t t = 0;
  for (size_t s = 0; s < f.params.slots().size(); ++s) {
    if (!f.trainable(s)) continue;
    for (size_t i = 0; i < f.n(s); ++i)
      EXPECT_NEAR(f.w(s)[i], ts[t].w[i], tol * (1 + std::abs(ts[t].w[i])))
          << f.params.slots()[s].name << "[" << i << "]";
    ++t;
  }
}

// Three steps: the first two with a gradient norm above max_grad_norm (clipped), the third
// below it; the learning rate changes between steps as a schedule would change it.
void check_against_oracle(double wd) {
  Fixture f;
  f.fill(11, 2.0);
  const int running = f.params.find("running");
  ASSERT_GE(running, 0);
  const std::vector<double> stats(f.w(running), f.w(running) + 4);
  LambOptions o;
  o.weight_decay = wd;
  Lamb lamb(o);
  lamb.attach(f.params, f.params.ops());
  auto oracle = oracle_of(f);
  const double lrs[] = {1e-3, 2e-3, 5e-4};
  const double grad_scales[] = {2.0, 1.5, 0.05};
  for (int k = 0; k < 3; ++k) {
    if (k > 0) f.set_grads(20 + k, grad_scales[k]);
    const auto grads = grads_of(f);
    const double gnorm = oracle_step(oracle, grads, lrs[k], k + 1, wd);
    EXPECT_EQ(gnorm > 1.0, k < 2) << "steps 1 and 2 clip, step 3 does not; step " << k + 1
                                  << " has norm " << gnorm;
    lamb.step(lrs[k]);
    EXPECT_NEAR(lamb.last_gradient_norm(), gnorm, 1e-14 * gnorm);
    expect_weights(f, oracle, 1e-14);
  }
  EXPECT_EQ(lamb.steps_taken(), 3);
  // Batch-norm running statistics are not parameters the optimizer sees.
  EXPECT_EQ(std::memcmp(f.w(running), stats.data(), 4 * sizeof(double)), 0);
}

TEST(Lamb, MatchesThePeerLambStepWithWeightDecay) { check_against_oracle(0.01); }

TEST(Lamb, MatchesThePeerLambStepWithoutWeightDecay) { check_against_oracle(0.0); }

// One element, w = 2, g = 0.5 (no clip): m = 0.05, v = 0.00025, m̂ = 0.5, v̂ = 0.25,
// u = 0.5 / (0.5 + 1e-6) + 0.01 * 2. The trust ratio |w| / |u| turns the step into lr * |w|:
// w = 2 - 0.1 * 2 = 1.8. Without weight decay the step is lr * u = 0.1 * 0.5 / 0.500001.
TEST(Lamb, HandComputedSingleElementSteps) {
  auto backend = make_backend("reference");
  for (double wd : {0.01, 0.0}) {
    ParamStore ps({flat_slot("w", 1)}, DType::f64, *backend);
    ps.value(0).as<double>()[0] = 2.0;
    ps.grad(0).as<double>()[0] = 0.5;
    LambOptions o;
    o.weight_decay = wd;
    Lamb lamb(o);
    lamb.attach(ps, ps.ops());
    lamb.step(0.1);
    const double expected = wd != 0 ? 1.8 : 2.0 - 0.1 * 0.5 / (0.5 + 1e-6);
    EXPECT_NEAR(ps.value(0).as<double>()[0], expected, 1e-15) << "wd " << wd;
    // The update direction is left in the gradient buffer, as apex leaves it.
    EXPECT_NEAR(ps.grad(0).as<double>()[0], 0.5 / (0.5 + 1e-6) + wd * 2.0, 1e-15);
    auto state = lamb.state();
    ASSERT_EQ(state.size(), 2u);
    EXPECT_EQ(state[0].first, "m");
    EXPECT_DOUBLE_EQ(static_cast<double*>(state[0].second->data())[0], 0.05);
    EXPECT_DOUBLE_EQ(static_cast<double*>(state[1].second->data())[0], 0.00025);
  }
}

// g = 3 > max_grad_norm 1: the gradient is divided by 3, so m = 0.1 * 1 and v = 0.001 * 1.
TEST(Lamb, ClipsByTheGlobalNorm) {
  auto backend = make_backend("reference");
  ParamStore ps({flat_slot("a", 1), flat_slot("b", 1)}, DType::f64, *backend);
  ps.grad(0).as<double>()[0] = 3.0;  // global norm 5 with b's 4
  ps.grad(1).as<double>()[0] = 4.0;
  ps.value(0).as<double>()[0] = 1.0;
  ps.value(1).as<double>()[0] = -1.0;
  Lamb lamb(LambOptions{.weight_decay = 0.0});
  lamb.attach(ps, ps.ops());
  lamb.step(0.01);
  EXPECT_DOUBLE_EQ(lamb.last_gradient_norm(), 5.0);
  const double* m = static_cast<double*>(lamb.state()[0].second->data());
  const double* v = static_cast<double*>(lamb.state()[1].second->data());
  EXPECT_DOUBLE_EQ(m[0], 0.1 * 0.6);
  EXPECT_NEAR(v[0], 0.001 * 0.36, 1e-15 * 0.00036);           // 1 - 0.999 is not 0.001 in binary
  const size_t b_at = ps.slots()[1].offset / sizeof(double);  // the next 256-byte slice
  EXPECT_DOUBLE_EQ(m[b_at], 0.1 * 0.8);
  EXPECT_NEAR(ps.value(1).as<double>()[0], -1.0 - 0.01 * 0.8 / (0.8 + 1e-6), 1e-15);
}

// Either norm 0 makes the ratio 1: a zero weight still moves by lr * u; a tensor with zero
// weight and zero gradient has u = 0 and stays where it is.
TEST(Lamb, ZeroNormsGiveRatioOne) {
  auto backend = make_backend("reference");
  ParamStore ps({flat_slot("zero_w", 2), flat_slot("still", 2)}, DType::f64, *backend);
  double* w0 = ps.value(0).as<double>();
  ps.grad(0).as<double>()[0] = 0.3;
  ps.grad(0).as<double>()[1] = -0.4;
  Lamb lamb(LambOptions{.weight_decay = 0.01});
  lamb.attach(ps, ps.ops());
  lamb.step(0.1);
  EXPECT_NEAR(w0[0], -0.1 * 0.3 / (0.3 + 1e-6), 1e-15);
  EXPECT_NEAR(w0[1], 0.1 * 0.4 / (0.4 + 1e-6), 1e-15);
  EXPECT_EQ(ps.value(1).as<double>()[0], 0.0);
  EXPECT_EQ(ps.value(1).as<double>()[1], 0.0);
}

// On a device the trust ratios are computed where the update runs, from norms that stay in the
// device's memory: a step (its global norm offered, as TrainStep offers it) hands no value back
// to the host, and its weights are the host's to the bit. The pretend device counts every
// VectorOps call that returns a value (test::CountingVectorOps).
TEST(Lamb, OnADeviceTheTrustRatiosWaitForNoTensor) {
  test::CountingBackend device(/*pretend_device=*/true);
  Fixture host;
  ParamStore on_device(
      {flat_slot("a", 5), flat_slot("running", 4, false), flat_slot("b", 3), flat_slot("c", 7)},
      DType::f64, device);
  host.fill(3, 0.5);
  std::memcpy(on_device.values(), host.params.values(), host.params.bytes());
  Lamb on_host_lamb(LambOptions{.weight_decay = 0.01}),
      on_device_lamb(LambOptions{.weight_decay = 0.01});
  on_host_lamb.attach(host.params, host.params.ops());
  on_device_lamb.attach(on_device, on_device.ops());
  for (uint64_t step = 0; step < 3; ++step) {
    host.set_grads(10 + step, 0.5);
    std::memcpy(on_device.grads(), host.params.grads(), host.params.trainable_bytes());
    on_host_lamb.offer_gradient_sum_squares(host.params.grad_sum_squares());
    on_device_lamb.offer_gradient_sum_squares(on_device.grad_sum_squares());
    device.value_reads = 0;
    on_device_lamb.step(0.01);
    on_host_lamb.step(0.01);
    EXPECT_EQ(device.value_reads, 0) << "step " << step;
    EXPECT_EQ(std::memcmp(on_device.values(), host.params.values(), host.params.bytes()), 0)
        << "step " << step;
  }
}

TEST(Lamb, RefusesImpossibleSettings) {
  EXPECT_THROW(Lamb(LambOptions{.max_grad_norm = 0}), Error);
  EXPECT_THROW(Lamb(LambOptions{.eps = 0}), Error);
  EXPECT_THROW(Lamb(LambOptions{.beta1 = 1.0}), Error);
  EXPECT_THROW(Lamb(LambOptions{.weight_decay = -1}), Error);
  Lamb unattached{LambOptions{}};
  EXPECT_THROW(unattached.step(0.1), Error);
}

}  // namespace
}  // namespace crest
