#include "crest/train/optimizer_log_keys.hpp"

#include <algorithm>
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

std::vector<MllogKey> resnet_log_keys(const Config& config, int64_t steps_per_epoch) {
  const OptimizerConfig& o = config.optimizer;
  const LrScheduleConfig& l = config.lr_schedule;
  const std::string name = find_optimizer_type(o.name).log_name;
  const std::string opt = name + "_opt_";
  std::vector<MllogKey> out = {{"opt_name", name}};
  out.push_back({opt + "base_learning_rate", l.per_step ? l.start_lr : l.base_lr});
  if (l.per_step && l.type == "polynomial") {
    out.push_back({opt + "end_learning_rate", l.end_lr});
    out.push_back({opt + "learning_rate_decay_poly_power", l.power});
    out.push_back({opt + "learning_rate_decay_steps", l.decay_steps});
    const double warmup_epochs = steps_per_epoch > 0 ? static_cast<double>(l.lr_warmup_steps) /
                                                           static_cast<double>(steps_per_epoch)
                                                     : 0.0;
    // SGD's warmup key has no prefix in the rules; LARS's has.
    out.push_back({name == "lars" ? opt + "learning_rate_warmup_epochs"
                                  : std::string("opt_learning_rate_warmup_epochs"),
                   warmup_epochs});
  }
  out.push_back({opt + "weight_decay", o.weight_decay});
  out.push_back({opt + "momentum", o.momentum});
  if (name == "lars") out.push_back({"lars_epsilon", o.trust_eps});
  const int group = std::max(1, config.dist.batchnorm_group_size);
  out.push_back({"model_bn_span", config.data.batch_size * group});
  return out;
}

}  // namespace crest
