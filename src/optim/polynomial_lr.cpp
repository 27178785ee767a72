// lr_schedule.type: polynomial, the MLPerf ResNet-50 reference's polynomial decay after a linear
// warmup: crest/optim/step_lr_schedule.hpp has the formula.
#include <algorithm>
#include <cmath>
#include <string>

#include "crest/core/error.hpp"
#include "crest/optim/lr_schedule_registry.hpp"

namespace crest {
namespace {

void validate_polynomial(const StepLrSchedule& s) {
  if (s.decay_steps < 1)
    throw_input("lr_schedule.decay_steps must be >= 1, got " + std::to_string(s.decay_steps));
  if (!(s.end_lr >= 0 && s.end_lr < s.start_lr))
    throw_input("lr_schedule.end_lr must be >= 0 and below start_lr (" +
                lr_setting_text(s.start_lr) + "), got " + lr_setting_text(s.end_lr));
  if (!(s.power > 0) || !std::isfinite(s.power))
    throw_input("lr_schedule.power must be a finite positive number, got " +
                lr_setting_text(s.power));
  // The reference's warmup is base * e / W: no factor.
  if (s.warmup_factor != 1.0)
    throw_input(
        "lr_schedule.lr_warmup_factor: the polynomial schedule warms up linearly from 0 "
        "(factor 1), got " +
        lr_setting_text(s.warmup_factor));
}

double polynomial_rate(const StepLrSchedule& s, int64_t e) {
  const int64_t t = std::min(e - s.warmup_steps, s.decay_steps);
  const double left = 1.0 - static_cast<double>(t) / static_cast<double>(s.decay_steps);
  return s.end_lr + (s.start_lr - s.end_lr) * std::pow(left, s.power);
}

LrScheduleType polynomial_type() {
  LrScheduleType t;
  t.name = "polynomial";
  t.keys = {"decay_steps", "end_lr", "power"};
  t.required = {"decay_steps"};
  t.validate = validate_polynomial;
  t.rate = polynomial_rate;
  // A Keras schedule is called with the optimizer's iteration count: step i is e = i.
  t.position = [](const StepLrSchedule& /*s*/, int64_t step) { return step; };
  t.log_entries = [](const StepLrSchedule& s) {
    std::vector<LoggedEntry> out = {
        {"decay_steps", s.decay_steps}, {"end_lr", s.end_lr}, {"power", s.power}};
    for (LoggedEntry& e : warmup_log_entries(s)) out.push_back(std::move(e));
    return out;
  };
  return t;
}

}  // namespace

CREST_REGISTER_LR_SCHEDULE(polynomial, polynomial_type());

}  // namespace crest
