#include "crest/train/optimizer_log_keys.hpp"

#include <variant>

#include "crest/optim/optimizer_registry.hpp"

namespace crest {
namespace {

// opt_name, then the parameter group as its reference framework names it (the registry's).
void add_optimizer_keys(const OptimizerConfig& o, double lr, std::vector<MllogKey>& out) {
  out.push_back({"opt_name", o.name});
  for (const auto& [key, value] : optimizer_parameter_group(o, lr))
    out.push_back({"opt_" + key, std::visit([](const auto& v) { return MllogValue(v); }, value)});
}

void add_scheduler_keys(const LrScheduleConfig& l, std::vector<MllogKey>& out) {
  if (!l.per_step || l.type == StepLrType::none) return;  // the reference has no scheduler then
  out.push_back({"scheduler_type", enum_name(l.type)});
  if (l.type == StepLrType::multistep) {
    out.push_back({"scheduler_milestones", l.milestones});
    out.push_back({"scheduler_decay_rate", l.decay_rate});
  } else {
    out.push_back({"scheduler_t_max", l.t_max});
    out.push_back({"scheduler_eta_min", l.eta_min});
  }
  out.push_back({"scheduler_lr_warmup_steps", l.lr_warmup_steps});
  out.push_back({"scheduler_lr_warmup_factor", l.lr_warmup_factor});
  if (l.closed_form) out.push_back({"scheduler_closed_form", true});
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
