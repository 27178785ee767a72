#include "crest/train/optimizer_log_keys.hpp"

#include <variant>

#include "crest/optim/lr_schedule_registry.hpp"
#include "crest/optim/optimizer_registry.hpp"
#include "crest/train/trainer.hpp"

namespace crest {
namespace {

MllogValue logged(const LoggedValue& v) {
  return std::visit([](const auto& x) { return MllogValue(x); }, v);
}

// opt_name, then the parameter group as its reference framework names it (the registry's).
void add_optimizer_keys(const OptimizerConfig& o, double lr, std::vector<MllogKey>& out) {
  out.push_back({"opt_name", o.name});
  for (const auto& [key, value] : optimizer_parameter_group(o, lr))
    out.push_back({"opt_" + key, logged(value)});
}

// scheduler_<key>, the DeepCAM reference's scheduler as the registry describes it.
void add_scheduler_keys(const LrScheduleConfig& l, std::vector<MllogKey>& out) {
  if (!l.per_step) return;
  for (const auto& [key, value] : scheduler_log_entries(step_lr_schedule_of(l)))
    out.push_back({"scheduler_" + key, logged(value)});
}

}  // namespace

std::vector<MllogKey> optimizer_log_keys(const Config& config) {
  std::vector<MllogKey> out;
  const LrScheduleConfig& l = config.lr_schedule;
  add_optimizer_keys(config.optimizer, l.per_step ? l.start_lr : l.base_lr, out);
  add_scheduler_keys(l, out);
  return out;
}

}  // namespace crest
