#include "crest/optim/step_lr_schedule.hpp"

#include <cmath>
#include <cstdio>
#include <numbers>
#include <string>

#include "crest/core/error.hpp"

namespace crest {
namespace {

std::string text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

const char* StepLrSchedule::type_name(Type t) {
  switch (t) {
    case constant:
      return "none";
    case multistep:
      return "multistep";
    case cosine_annealing:
      return "cosine_annealing";
  }
  return "?";
}

void StepLrSchedule::validate() const {
  if (!std::isfinite(start_lr) || start_lr <= 0)
    throw_input("lr_schedule.start_lr must be a finite positive number, got " + text(start_lr));
  if (type == constant) return;  // the reference ignores the warmup without a schedule
  if (warmup_steps < 0)
    throw_input("lr_schedule.lr_warmup_steps must be >= 0, got " + std::to_string(warmup_steps));
  if (!(warmup_factor >= 1) || !std::isfinite(warmup_factor))
    throw_input("lr_schedule.lr_warmup_factor must be >= 1, got " + text(warmup_factor));
  if (type == multistep) {
    if (!(decay_rate > 0 && decay_rate <= 1))
      throw_input("lr_schedule.decay_rate must be in (0, 1], got " + text(decay_rate));
    const int64_t first = warmup_steps > 0 ? 0 : 1;
    for (size_t k = 0; k < milestones.size(); ++k) {
      if (milestones[k] < first)
        throw_input("lr_schedule.milestones[" + std::to_string(k) + "] must be >= " +
                    std::to_string(first) + ", got " + std::to_string(milestones[k]) +
                    (first == 1 ? " (without warmup the reference's first step already counts 1, "
                                  "so a milestone 0 would never apply)"
                                : ""));
      if (k > 0 && milestones[k] <= milestones[k - 1])
        throw_input("lr_schedule.milestones must be strictly increasing, got " +
                    std::to_string(milestones[k - 1]) + " before " + std::to_string(milestones[k]));
    }
  } else {
    if (closed_form)
      throw_input("lr_schedule.closed_form applies to type: multistep only (NVIDIA's closed form)");
    if (t_max < 1) throw_input("lr_schedule.t_max must be >= 1, got " + std::to_string(t_max));
    if (!(eta_min >= 0) || !std::isfinite(eta_min))
      throw_input("lr_schedule.eta_min must be >= 0, got " + text(eta_min));
  }
}

// The reference's arithmetic: base * (e * (1 / W)), or base * ((f - 1) * e * (1 / W) + 1).
double StepLrSchedule::warmup_value(int64_t e) const {
  const double slope = 1.0 / static_cast<double>(warmup_steps);
  const double x = static_cast<double>(e);
  if (warmup_factor == 1.0) return start_lr * (x * slope);
  return start_lr * ((warmup_factor - 1.0) * x * slope + 1.0);
}

// The last warmup value, where the chainable schedule starts. With W = 1 no warmup value was
// ever computed, so the chain starts from the optimizer's own rate, base.
double StepLrSchedule::plateau() const {
  return warmup_steps >= 2 ? warmup_value(warmup_steps - 1) : start_lr;
}

// Each passed milestone multiplies the rate once, in order, as the chainable scheduler does.
double StepLrSchedule::multistep_lr(int64_t e) const {
  const int64_t w = warmup_steps;
  double lr = closed_form ? start_lr : w > 0 ? plateau() : start_lr;
  for (const int64_t m : milestones) {
    const bool passed = closed_form ? e - w > m : w > 0 ? e >= m + w + 1 : e >= m;
    if (passed) lr *= decay_rate;
  }
  return lr;
}

double StepLrSchedule::cosine_lr(int64_t e) const {
  const int64_t t = e - warmup_steps;
  const double amplitude = t <= t_max ? plateau() : start_lr;
  const double phase = std::numbers::pi * static_cast<double>(t) / static_cast<double>(t_max);
  return eta_min + (amplitude - eta_min) * (1.0 + std::cos(phase)) / 2.0;
}

double StepLrSchedule::lr(int64_t step) const {
  validate();
  if (step < 0) throw_input("optimizer step must be >= 0, got " + std::to_string(step));
  if (type == constant) return start_lr;
  // torch's CosineAnnealingLR (no warmup) is built with last_epoch -1: step i is e = i.
  if (type == cosine_annealing && warmup_steps == 0) return cosine_lr(step);
  const int64_t e = step + 1;
  if (e < warmup_steps) return warmup_value(e);
  return type == multistep ? multistep_lr(e) : cosine_lr(e);
}

}  // namespace crest
