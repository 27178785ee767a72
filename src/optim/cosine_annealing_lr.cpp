// lr_schedule.type: cosine_annealing, torch's CosineAnnealingLR after the warmup:
// crest/optim/step_lr_schedule.hpp has the formula.
#include <cmath>
#include <numbers>
#include <string>

#include "crest/core/error.hpp"
#include "crest/optim/lr_schedule_registry.hpp"

namespace crest {
namespace {

void validate_cosine(const StepLrSchedule& s) {
  if (s.t_max < 1) throw_input("lr_schedule.t_max must be >= 1, got " + std::to_string(s.t_max));
  if (!(s.eta_min >= 0) || !std::isfinite(s.eta_min))
    throw_input("lr_schedule.eta_min must be >= 0, got " + lr_setting_text(s.eta_min));
}

double cosine_rate(const StepLrSchedule& s, int64_t e) {
  const int64_t t = e - s.warmup_steps;
  const double amplitude = t <= s.t_max ? s.plateau() : s.start_lr;
  const double phase = std::numbers::pi * static_cast<double>(t) / static_cast<double>(s.t_max);
  return s.eta_min + (amplitude - s.eta_min) * (1.0 + std::cos(phase)) / 2.0;
}

LrScheduleType cosine_annealing_type() {
  LrScheduleType t;
  t.name = "cosine_annealing";
  t.keys = {"t_max", "eta_min"};
  t.required = {"t_max"};
  t.validate = validate_cosine;
  t.rate = cosine_rate;
  // torch's CosineAnnealingLR alone (no warmup) is built with last_epoch -1: step i is e = i.
  t.position = [](const StepLrSchedule& s, int64_t step) {
    return s.warmup_steps == 0 ? step : step + 1;
  };
  t.log_entries = [](const StepLrSchedule& s) {
    std::vector<LoggedEntry> out = {{"t_max", s.t_max}, {"eta_min", s.eta_min}};
    for (LoggedEntry& e : warmup_log_entries(s)) out.push_back(std::move(e));
    return out;
  };
  return t;
}

}  // namespace

CREST_REGISTER_LR_SCHEDULE(cosine_annealing, cosine_annealing_type());

}  // namespace crest
