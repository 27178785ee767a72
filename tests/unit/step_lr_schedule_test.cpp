// The per-step (DeepCAM) learning-rate schedules. Two oracles: literal values worked out from
// reference/DEEPCAM.md "LR schedule semantics" (the reference 2048 configuration among them), and
// a step-by-step simulation of the reference's scheduler objects (torch's _LRScheduler protocol:
// built with last_epoch = 0 and stepped once at construction, stepped after every optimizer step;
// MultiStepLRWarmup / CosineAnnealingLRWarmup of mlcommons/hpc deepcam utils/schedulers.py,
// torch's MultiStepLR and CosineAnnealingLR without warmup), whose chainable recursions the
// closed forms under test must reproduce.
#include "crest/optim/step_lr_schedule.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "crest/core/error.hpp"
#include "crest/optim/lr_policy.hpp"

namespace crest {
namespace {

StepLrSchedule make(const std::string& type, double base, int64_t w, double f = 1.0) {
  StepLrSchedule s;
  s.type = type;
  s.start_lr = base;
  s.warmup_steps = w;
  s.warmup_factor = f;
  return s;
}

StepLrSchedule multistep(double base, int64_t w, std::vector<int64_t> milestones, double gamma,
                         double f = 1.0) {
  StepLrSchedule s = make("multistep", base, w, f);
  s.milestones = std::move(milestones);
  s.decay_rate = gamma;
  return s;
}

StepLrSchedule cosine(double base, int64_t w, int64_t t_max, double eta_min, double f = 1.0) {
  StepLrSchedule s = make("cosine_annealing", base, w, f);
  s.t_max = t_max;
  s.eta_min = eta_min;
  return s;
}

// The reference's scheduler objects, simulated: `group_lr` is the optimizer's param_group lr,
// get_lr() the class's rule at last_epoch `e`, and the rate optimizer step i uses is the group's
// lr after the construction step and i scheduler steps.
class ReferenceScheduler {
 public:
  explicit ReferenceScheduler(const StepLrSchedule& s) : s_(s), group_lr_(s.start_lr) {
    // mlcommons/hpc builds every scheduler with last_epoch = start_step = 0, except
    // CosineAnnealingLR without warmup (last_epoch -1); the constructor steps once.
    e_ = (s.type == "cosine_annealing" && s.warmup_steps == 0) ? -1 : 0;
    step();
  }
  double lr() const { return group_lr_; }
  void step() {
    ++e_;
    group_lr_ = get_lr();
  }

 private:
  double warm() const {
    const double slope = 1.0 / static_cast<double>(s_.warmup_steps);
    if (s_.warmup_factor == 1.0) return s_.start_lr * (static_cast<double>(e_) * slope);
    return s_.start_lr * ((s_.warmup_factor - 1.) * static_cast<double>(e_) * slope + 1.);
  }
  double get_lr() const {
    const int64_t w = s_.warmup_steps;
    if (s_.type == "none") return s_.start_lr;
    if (w > 0 && e_ < w) return warm();
    if (s_.type == "multistep") {
      // MultiStepLRWarmup: milestones at m + W + 1; torch MultiStepLR (W = 0): at m.
      int hits = 0;
      for (int64_t m : s_.milestones) hits += e_ == (w > 0 ? m + w + 1 : m);
      return hits == 0 ? group_lr_ : group_lr_ * std::pow(s_.decay_rate, hits);
    }
    const int64_t t = e_ - w, T = s_.t_max;
    const double pi = std::numbers::pi, eta = s_.eta_min;
    if (t == 0) return group_lr_;
    if ((t - 1 - T) % (2 * T) == 0)
      return group_lr_ + (s_.start_lr - eta) * (1 - std::cos(pi / static_cast<double>(T))) / 2;
    return (1 + std::cos(pi * static_cast<double>(t) / static_cast<double>(T))) /
               (1 + std::cos(pi * static_cast<double>(t - 1) / static_cast<double>(T))) *
               (group_lr_ - eta) +
           eta;
  }

  StepLrSchedule s_;
  int64_t e_ = 0;
  double group_lr_;
};

void expect_matches_reference(const StepLrSchedule& s, int64_t steps) {
  ReferenceScheduler ref(s);
  for (int64_t i = 0; i < steps; ++i) {
    const double want = ref.lr();
    ASSERT_NEAR(s.lr(i), want, 1e-12 * std::max(std::abs(want), s.start_lr))
        << "step " << i << " (type " << s.type << ", W " << s.warmup_steps << ", f "
        << s.warmup_factor << ")";
    ref.step();
  }
}

// The reference 2048 configuration (DEEPCAM.md): lr 0.0055, W = 400, milestones [800], g 0.1.
TEST(StepLrSchedule, Reference2048MultistepWithWarmup) {
  const StepLrSchedule s = multistep(0.0055, 400, {800}, 0.1);
  EXPECT_DOUBLE_EQ(s.lr(0), 1.375e-5);
  EXPECT_DOUBLE_EQ(s.lr(1), 2 * 1.375e-5);
  EXPECT_DOUBLE_EQ(s.lr(397), 0.0055 * 398 / 400);
  for (int64_t i : {398, 399, 400, 800, 1199}) EXPECT_DOUBLE_EQ(s.lr(i), 0.00548625) << i;
  for (int64_t i : {1200, 1201, 5000, 100000}) EXPECT_DOUBLE_EQ(s.lr(i), 0.000548625) << i;
  expect_matches_reference(s, 1500);
}

// W = 1: no warmup value is ever computed, the chain starts from base. W = 2: steps 0 and 1 both
// use base / 2 (the plateau (W - 1) / W is reached at once).
TEST(StepLrSchedule, ShortWarmups) {
  const StepLrSchedule w1 = multistep(0.01, 1, {3}, 0.5);
  EXPECT_DOUBLE_EQ(w1.lr(0), 0.01);
  EXPECT_DOUBLE_EQ(w1.lr(3), 0.01);  // e = 4 < m + W + 1 = 5
  EXPECT_DOUBLE_EQ(w1.lr(4), 0.005);
  const StepLrSchedule w2 = multistep(0.01, 2, {3}, 0.5);
  EXPECT_DOUBLE_EQ(w2.lr(0), 0.005);
  EXPECT_DOUBLE_EQ(w2.lr(1), 0.005);
  EXPECT_DOUBLE_EQ(w2.lr(4), 0.005);
  EXPECT_DOUBLE_EQ(w2.lr(5), 0.0025);
  EXPECT_DOUBLE_EQ(cosine(0.01, 2, 10, 0).lr(0), 0.005);
  EXPECT_DOUBLE_EQ(cosine(0.01, 2, 10, 0).lr(1), 0.005);
  EXPECT_DOUBLE_EQ(cosine(0.01, 1, 10, 0).lr(0), 0.01);
  for (const auto& s : {w1, w2, cosine(0.01, 1, 10, 0.001), cosine(0.01, 2, 10, 0.001)})
    expect_matches_reference(s, 60);
}

// Without warmup, torch's MultiStepLR (last_epoch 0) decays from step m - 1 on.
TEST(StepLrSchedule, MultistepWithoutWarmup) {
  const StepLrSchedule s = multistep(0.002, 0, {4096, 8192}, 0.1);
  EXPECT_DOUBLE_EQ(s.lr(0), 0.002);
  EXPECT_DOUBLE_EQ(s.lr(4094), 0.002);
  EXPECT_DOUBLE_EQ(s.lr(4095), 0.0002);
  EXPECT_DOUBLE_EQ(s.lr(8190), 0.0002);
  EXPECT_NEAR(s.lr(8191), 0.00002, 1e-20);
  EXPECT_DOUBLE_EQ(multistep(0.1, 0, {1}, 0.5).lr(0), 0.05);  // milestone 1: step 0 decayed
  expect_matches_reference(multistep(0.002, 0, {5, 9, 10}, 0.3), 40);
}

// Cosine without warmup (torch CosineAnnealingLR, last_epoch -1): step i uses
// eta_min + (base - eta_min)(1 + cos(pi i / T)) / 2, step 0 = base, step T = eta_min.
TEST(StepLrSchedule, CosineWithoutWarmup) {
  const StepLrSchedule s = cosine(0.00155, 0, 9000, 0);
  EXPECT_DOUBLE_EQ(s.lr(0), 0.00155);
  EXPECT_NEAR(s.lr(4500), 0.00155 / 2, 1e-18);
  EXPECT_NEAR(s.lr(9000), 0.0, 1e-18);
  const double pi = std::numbers::pi;
  EXPECT_NEAR(s.lr(1234), 0.00155 * (1 + std::cos(pi * 1234 / 9000)) / 2, 1e-18);
  expect_matches_reference(cosine(0.01, 0, 7, 0.002), 50);  // several periods beyond T
}

// Cosine with warmup: from step W - 1 on, eta_min + (P - eta_min)(1 + cos(pi (i + 1 - W) / T)) / 2
// with the plateau P = base (W - 1) / W.
TEST(StepLrSchedule, CosineWithWarmup) {
  const double base = 0.004, eta = 1e-4;
  const int64_t w = 100, t_max = 500;
  const StepLrSchedule s = cosine(base, w, t_max, eta);
  const double plateau = base * 99 / 100;
  EXPECT_DOUBLE_EQ(s.lr(0), base / 100);
  EXPECT_DOUBLE_EQ(s.lr(98), plateau);
  EXPECT_DOUBLE_EQ(s.lr(99), plateau);  // t = 0
  const double pi = std::numbers::pi;
  for (int64_t i : {100, 250, 350, 598, 599}) {
    const double t = static_cast<double>(i + 1 - w);
    EXPECT_NEAR(s.lr(i), eta + (plateau - eta) * (1 + std::cos(pi * t / t_max)) / 2, 1e-15) << i;
  }
  EXPECT_NEAR(s.lr(599), eta, 1e-15);  // t = T
  expect_matches_reference(s, 2000);   // past T the recursion restarts from base
}

// f > 1: the warmup rises from base towards f * base; the plateau is base ((f - 1)(W - 1)/W + 1).
TEST(StepLrSchedule, WarmupFactorAboveOne) {
  const StepLrSchedule s = multistep(0.001, 10, {20}, 0.5, 4.0);
  EXPECT_DOUBLE_EQ(s.lr(0), 0.001 * (3.0 * 1 / 10 + 1));
  EXPECT_DOUBLE_EQ(s.lr(8), 0.001 * (3.0 * 9 / 10 + 1));
  EXPECT_DOUBLE_EQ(s.lr(9), 0.001 * (3.0 * 9 / 10 + 1));
  EXPECT_DOUBLE_EQ(s.lr(30), 0.001 * 3.7 * 0.5);
  expect_matches_reference(s, 60);
  expect_matches_reference(cosine(0.001, 10, 30, 0.0, 2.5), 120);
}

// No type: constant start_lr; the warmup settings are ignored, as the reference ignores them.
TEST(StepLrSchedule, NoScheduleIsConstant) {
  StepLrSchedule s = make("none", 0.0042, 400, 3.0);
  for (int64_t i : {0, 1, 399, 400, 100000}) EXPECT_EQ(s.lr(i), 0.0042);
}

// NVIDIA's closed form: after warmup base * g^k, k = the milestones m < e - W, no plateau.
TEST(StepLrSchedule, ClosedForm) {
  StepLrSchedule s = multistep(0.0055, 400, {800}, 0.1);
  s.closed_form = true;
  EXPECT_DOUBLE_EQ(s.lr(0), 1.375e-5);
  EXPECT_DOUBLE_EQ(s.lr(398), 0.00548625);  // still warmup (e = 399)
  EXPECT_DOUBLE_EQ(s.lr(399), 0.0055);      // base, not the plateau
  EXPECT_DOUBLE_EQ(s.lr(1199), 0.0055);
  EXPECT_NEAR(s.lr(1200), 0.00055, 1e-18);
  StepLrSchedule no_warmup = multistep(0.002, 0, {10}, 0.1);
  no_warmup.closed_form = true;
  EXPECT_DOUBLE_EQ(no_warmup.lr(9), 0.002);  // one step later than torch's MultiStepLR
  EXPECT_NEAR(no_warmup.lr(10), 0.0002, 1e-19);
}

// Sweep: every type, warmup 0..5 and factors 1 and 3, milestones and T around the warmup.
TEST(StepLrSchedule, MatchesTheReferenceSchedulersInASweep) {
  for (int64_t w : {0, 1, 2, 3, 5})
    for (double f : {1.0, 3.0}) {
      expect_matches_reference(multistep(0.01, w, {w > 0 ? 0 : 1, 4, 7}, 0.5, f), 30);
      expect_matches_reference(multistep(0.01, w, {2, 3}, 0.1, f), 30);
      for (int64_t t_max : {1, 2, 6})
        expect_matches_reference(cosine(0.01, w, t_max, 0.001, f), 40);
    }
}

TEST(StepLrSchedule, InvalidSettingsNameTheKey) {
  auto expect_error = [](const StepLrSchedule& s, const std::string& key) {
    try {
      (void)s.lr(0);
      ADD_FAILURE() << "no error for " << key;
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), 2);
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  };
  expect_error(make("none", 0, 0), "lr_schedule.start_lr");
  expect_error(multistep(0.1, 0, {3}, 1.5), "lr_schedule.decay_rate");
  expect_error(multistep(0.1, 0, {3}, 0), "lr_schedule.decay_rate");
  expect_error(multistep(0.1, 0, {5, 5}, 0.1), "lr_schedule.milestones");
  expect_error(multistep(0.1, 0, {0}, 0.1), "lr_schedule.milestones[0]");
  expect_error(multistep(0.1, -1, {3}, 0.1), "lr_schedule.lr_warmup_steps");
  expect_error(multistep(0.1, 2, {3}, 0.1, 0.5), "lr_schedule.lr_warmup_factor");
  expect_error(cosine(0.1, 0, 0, 0), "lr_schedule.t_max");
  expect_error(cosine(0.1, 0, 5, -1), "lr_schedule.eta_min");
  StepLrSchedule c = cosine(0.1, 0, 5, 0);
  c.closed_form = true;
  expect_error(c, "lr_schedule.closed_form");
  EXPECT_THROW((void)multistep(0.1, 0, {3}, 0.1).lr(-1), Error);
}

StepLrSchedule polynomial(double base, int64_t w, int64_t decay_steps, double end, double power) {
  StepLrSchedule s = make("polynomial", base, w);
  s.decay_steps = decay_steps;
  s.end_lr = end;
  s.power = power;
  return s;
}

// The MLPerf ResNet-50 reference's schedule (mlcommons/training image_classification tensorflow2
// lars_util.py): a Keras schedule called with the optimizer's iteration count `step`, linear up
// to the base at step W, then tf.keras PolynomialDecay at max(step - W, 1), which holds its end
// value from D on.
double reference_polynomial(double base, int64_t w, int64_t d, double end, double power,
                            int64_t step) {
  if (step <= w && w > 0) return base * static_cast<double>(step) / static_cast<double>(w);
  const int64_t poly_step = std::max<int64_t>(step - w, w > 0 ? 1 : 0);
  const double p = static_cast<double>(std::min(poly_step, d)) / static_cast<double>(d);
  return (base - end) * std::pow(1.0 - p, power) + end;
}

TEST(StepLrSchedule, PolynomialIsTheMlperfResnetSchedule) {
  // Worked by hand: base 10, end 1e-4, W 4, D 8, power 2.
  const StepLrSchedule s = polynomial(10, 4, 8, 1e-4, 2);
  EXPECT_DOUBLE_EQ(s.lr(0), 0.0);  // the reference's first step runs at 0
  EXPECT_DOUBLE_EQ(s.lr(2), 5.0);
  EXPECT_DOUBLE_EQ(s.lr(4), 10.0);
  EXPECT_DOUBLE_EQ(s.lr(6), 9.9999 * 0.5625 + 1e-4);
  EXPECT_DOUBLE_EQ(s.lr(12), 1e-4);
  EXPECT_DOUBLE_EQ(s.lr(1000), 1e-4);
  // Against the reference's rule over whole runs, with and without warmup, other powers.
  struct Case {
    double base;
    int64_t w, d;
    double end, power;
  };
  for (const Case& c : {Case{10, 4, 8, 1e-4, 2}, Case{2.5, 0, 30, 0, 1},
                        Case{9.1, 17, 101, 1e-4, 2}, Case{0.1, 1, 5, 0.001, 0.5}}) {
    const StepLrSchedule p = polynomial(c.base, c.w, c.d, c.end, c.power);
    for (int64_t i = 0; i < c.w + c.d + 10; ++i)
      EXPECT_NEAR(p.lr(i), reference_polynomial(c.base, c.w, c.d, c.end, c.power, i),
                  1e-14 * c.base)
          << "step " << i << " of W " << c.w << ", D " << c.d;
  }
}

TEST(StepLrSchedule, PolynomialRefusesSettingsByName) {
  const auto expect_error = [](const StepLrSchedule& s, const std::string& key) {
    try {
      (void)s.lr(0);
      ADD_FAILURE() << "no error for " << key;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  };
  expect_error(polynomial(1, 0, 0, 0, 2), "lr_schedule.decay_steps");
  expect_error(polynomial(1, 0, 5, 1, 2), "lr_schedule.end_lr");
  expect_error(polynomial(1, 0, 5, -1, 2), "lr_schedule.end_lr");
  expect_error(polynomial(1, 0, 5, 0, 0), "lr_schedule.power");
  StepLrSchedule f = polynomial(1, 3, 5, 0, 2);
  f.warmup_factor = 2;
  expect_error(f, "lr_schedule.lr_warmup_factor");
}

// One interface for both families: the per-epoch one ignores the step, the per-step one the epoch.
TEST(LrPolicy, BothFamiliesBehindOneInterface) {
  LrSchedule epochs;  // the CosmoFlow reference: 0.001, linear from batch 64, 4 warmup epochs
  const auto per_epoch = make_epoch_lr_policy(epochs, 256);
  EXPECT_FALSE(per_epoch->per_step());
  EXPECT_DOUBLE_EQ(per_epoch->lr(0, 1), epochs.lr(1, 256));
  EXPECT_DOUBLE_EQ(per_epoch->lr(12345, 1), epochs.lr(1, 256));
  EXPECT_DOUBLE_EQ(per_epoch->lr(0, 40), epochs.lr(40, 256));
  const auto per_step = make_step_lr_policy(multistep(0.0055, 400, {800}, 0.1));
  EXPECT_TRUE(per_step->per_step());
  EXPECT_DOUBLE_EQ(per_step->lr(0, 7), 1.375e-5);
  EXPECT_DOUBLE_EQ(per_step->lr(1200, 0), 0.000548625);
  EXPECT_THROW(make_step_lr_policy(multistep(0.1, 0, {3}, 2.0)), Error);
  EXPECT_THROW(make_epoch_lr_policy(epochs, 0), Error);
}

}  // namespace
}  // namespace crest
