#include "crest/optim/step_lr_schedule.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "crest/core/error.hpp"
#include "crest/optim/lr_schedule_registry.hpp"

namespace crest {
namespace {

// type: none, the reference without a scheduler: start_lr throughout, the warmup ignored.
LrScheduleType constant_type() {
  LrScheduleType t;
  t.name = "none";
  t.scheduler = false;
  t.rate = [](const StepLrSchedule& s, int64_t /*e*/) { return s.start_lr; };
  return t;
}

}  // namespace

CREST_REGISTER_LR_SCHEDULE(none, constant_type());

void StepLrSchedule::validate() const {
  if (!std::isfinite(start_lr) || start_lr <= 0)
    throw_input("lr_schedule.start_lr must be a finite positive number, got " +
                lr_setting_text(start_lr));
  const LrScheduleType& t = find_lr_schedule_type(type);
  if (!t.scheduler) return;  // the reference ignores the warmup without a schedule
  // The one setting of another type that a struct can carry by mistake and nothing would read.
  if (closed_form && std::find(t.keys.begin(), t.keys.end(), "closed_form") == t.keys.end())
    throw_input("lr_schedule.closed_form applies to " + lr_schedules_taking("closed_form") +
                " only (NVIDIA's closed form)");
  if (warmup_steps < 0)
    throw_input("lr_schedule.lr_warmup_steps must be >= 0, got " + std::to_string(warmup_steps));
  if (!(warmup_factor >= 1) || !std::isfinite(warmup_factor))
    throw_input("lr_schedule.lr_warmup_factor must be >= 1, got " + lr_setting_text(warmup_factor));
  if (t.validate) t.validate(*this);
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

double StepLrSchedule::lr(int64_t step) const {
  validate();
  if (step < 0) throw_input("optimizer step must be >= 0, got " + std::to_string(step));
  const LrScheduleType& t = find_lr_schedule_type(type);
  if (!t.scheduler) return t.rate(*this, step);
  const int64_t e = t.position ? t.position(*this, step) : step + 1;
  if (e < warmup_steps) return warmup_value(e);
  return t.rate(*this, e);
}

}  // namespace crest
