// lr_schedule.type: multistep, torch's MultiStepLR after the warmup (or NVIDIA's closed form):
// crest/optim/step_lr_schedule.hpp has the formulas.
#include <string>

#include "crest/core/error.hpp"
#include "crest/optim/lr_schedule_registry.hpp"

namespace crest {
namespace {

void validate_multistep(const StepLrSchedule& s) {
  if (!(s.decay_rate > 0 && s.decay_rate <= 1))
    throw_input("lr_schedule.decay_rate must be in (0, 1], got " + lr_setting_text(s.decay_rate));
  const int64_t first = s.warmup_steps > 0 ? 0 : 1;
  const auto& m = s.milestones;
  for (size_t k = 0; k < m.size(); ++k) {
    if (m[k] < first)
      throw_input("lr_schedule.milestones[" + std::to_string(k) +
                  "] must be >= " + std::to_string(first) + ", got " + std::to_string(m[k]) +
                  (first == 1 ? " (without warmup the reference's first step already counts 1, "
                                "so a milestone 0 would never apply)"
                              : ""));
    if (k > 0 && m[k] <= m[k - 1])
      throw_input("lr_schedule.milestones must be strictly increasing, got " +
                  std::to_string(m[k - 1]) + " before " + std::to_string(m[k]));
  }
}

// Each passed milestone multiplies the rate once, in order, as the chainable scheduler does.
double multistep_rate(const StepLrSchedule& s, int64_t e) {
  const int64_t w = s.warmup_steps;
  double lr = s.closed_form ? s.start_lr : w > 0 ? s.plateau() : s.start_lr;
  for (const int64_t m : s.milestones) {
    const bool passed = s.closed_form ? e - w > m : w > 0 ? e >= m + w + 1 : e >= m;
    if (passed) lr *= s.decay_rate;
  }
  return lr;
}

LrScheduleType multistep_type() {
  LrScheduleType t;
  t.name = "multistep";
  t.keys = {"milestones", "decay_rate", "closed_form"};
  t.required = {"milestones", "decay_rate"};
  t.validate = validate_multistep;
  t.rate = multistep_rate;
  t.log_entries = [](const StepLrSchedule& s) {
    std::vector<LoggedEntry> out = {{"milestones", s.milestones}, {"decay_rate", s.decay_rate}};
    for (LoggedEntry& e : warmup_log_entries(s)) out.push_back(std::move(e));
    if (s.closed_form) out.push_back({"closed_form", true});  // crest's, not the reference's
    return out;
  };
  return t;
}

}  // namespace

CREST_REGISTER_LR_SCHEDULE(multistep, multistep_type());

}  // namespace crest
