#include "crest/optim/lr_schedule_registry.hpp"

#include <algorithm>
#include <cstdio>
#include <set>

#include "crest/core/name_registry.hpp"

namespace crest {
namespace {

NameRegistry<LrScheduleType>& registry() {
  static NameRegistry<LrScheduleType> types("lr_schedule.type");  // filled at static initialisation
  return types;
}

}  // namespace

bool register_lr_schedule_type(LrScheduleType type) {
  const std::string name = type.name;
  return registry().add(name, std::move(type));
}

const LrScheduleType* find_lr_schedule_type_or_null(const std::string& name) {
  return registry().find(name);
}

const LrScheduleType& find_lr_schedule_type(const std::string& name) { return registry().at(name); }

std::vector<std::string> lr_schedule_names() { return registry().names(); }

std::vector<std::string> lr_schedule_keys() {
  std::set<std::string> keys;
  for (const auto& name : lr_schedule_names())
    for (const auto& k : find_lr_schedule_type(name).keys) keys.insert(k);
  return {keys.begin(), keys.end()};
}

std::string lr_schedules_taking(const std::string& key) {
  std::vector<std::string> takers;
  for (const auto& name : lr_schedule_names()) {
    const auto& keys = find_lr_schedule_type(name).keys;
    if (std::find(keys.begin(), keys.end(), key) != keys.end()) takers.push_back("type: " + name);
  }
  return join_names(takers);
}

std::string lr_setting_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::vector<LoggedEntry> warmup_log_entries(const StepLrSchedule& s) {
  return {{"lr_warmup_steps", s.warmup_steps}, {"lr_warmup_factor", s.warmup_factor}};
}

std::vector<LoggedEntry> scheduler_log_entries(const StepLrSchedule& s) {
  const LrScheduleType& t = find_lr_schedule_type(s.type);
  if (!t.scheduler) return {};  // the reference has no scheduler then
  std::vector<LoggedEntry> out = {{"type", s.type}};
  if (t.log_entries)
    for (LoggedEntry& e : t.log_entries(s)) out.push_back(std::move(e));
  return out;
}

}  // namespace crest
