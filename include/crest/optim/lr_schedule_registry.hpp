// The per-step learning-rate schedules' registry: lr_schedule.type -> the section keys it reads,
// how it checks them, its rate after the shared warmup, and how the MLPerf log describes it.
// Each schedule's file registers itself with one line,
//
//   CREST_REGISTER_LR_SCHEDULE(cosine_annealing, cosine_annealing_type());
//
// so the config reader, the trainer and the MLPerf log know no schedule by name
// (docs/extending.md shows a whole one). The per-epoch family (CosmoFlow's, LrSchedule) has no
// type key and is not in the registry.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "crest/optim/logged_entry.hpp"
#include "crest/optim/step_lr_schedule.hpp"

namespace crest {

struct LrScheduleType {
  std::string name;  // lr_schedule.type's spelling: multistep
  // The section keys it reads besides start_lr and the warmup's; every other schedule's key is
  // refused under this type. `required`: those of them the section must give.
  std::vector<std::string> keys;
  std::vector<std::string> required;
  // false: a constant rate and no scheduler at all (type none): the reference then ignores the
  // warmup settings, and logs no scheduler keys.
  bool scheduler = true;
  // Throws crest::Error (input) naming lr_schedule.<key> of the first invalid setting; the
  // shared ones (start_lr, the warmup) are checked before. May be null.
  std::function<void(const StepLrSchedule&)> validate;
  // The scheduler position of optimizer step `step` (0-based), where the warmup is over: the
  // rate there. The shared warmup (StepLrSchedule::warmup_value) gives positions below W.
  std::function<double(const StepLrSchedule&, int64_t e)> rate;
  // The position of optimizer step `step`. Null: step + 1 (the reference builds its scheduler
  // already stepped once).
  std::function<int64_t(const StepLrSchedule&, int64_t step)> position;
  // The MLPerf log's scheduler_<key> entries after scheduler_type (the warmup's among them:
  // warmup_log_entries); null for none.
  std::function<std::vector<LoggedEntry>(const StepLrSchedule&)> log_entries;
};

bool register_lr_schedule_type(LrScheduleType type);

// The registered entry of `name`, or null; the same throwing crest::Error (input) listing the
// registered names.
const LrScheduleType* find_lr_schedule_type_or_null(const std::string& name);
const LrScheduleType& find_lr_schedule_type(const std::string& name);
// Registered names, sorted.
std::vector<std::string> lr_schedule_names();
// Every key some registered schedule reads (the section's per-step keys), sorted.
std::vector<std::string> lr_schedule_keys();
// The schedules reading `key`, for messages: "type: multistep".
std::string lr_schedules_taking(const std::string& key);

// A setting's value in messages ("%g").
std::string lr_setting_text(double v);

// The warmup's entries, scheduler_lr_warmup_steps and scheduler_lr_warmup_factor.
std::vector<LoggedEntry> warmup_log_entries(const StepLrSchedule& s);
// Every scheduler_<key> entry of `s` (scheduler_type first); empty without a scheduler.
std::vector<LoggedEntry> scheduler_log_entries(const StepLrSchedule& s);

#define CREST_REGISTER_LR_SCHEDULE(id, ...)                              \
  [[maybe_unused]] static const bool crest_lr_schedule_registered_##id = \
      ::crest::register_lr_schedule_type(__VA_ARGS__)

}  // namespace crest
