#include "crest/train/optimizer_log_keys.hpp"

namespace crest {
namespace {

// The parameter group's keys (after opt_name).
void add_group_keys(const OptimizerConfig& o, double lr, std::vector<MllogKey>& out) {
  const MllogValue betas = MllogValue::array({o.beta1, o.beta2});
  switch (o.name) {
    case OptimizerKind::lamb:
      // apex FusedLAMB's parameter group, in its order.
      out.push_back({"opt_lr", lr});
      out.push_back({"opt_bias_correction", true});
      out.push_back({"opt_betas", betas});
      out.push_back({"opt_eps", o.eps});
      out.push_back({"opt_weight_decay", o.weight_decay});
      out.push_back({"opt_grad_averaging", true});
      out.push_back({"opt_max_grad_norm", o.max_grad_norm});
      return;
    case OptimizerKind::adam:
    case OptimizerKind::adamw:
      // torch's parameter group (later torch versions add flags crest does not have).
      out.push_back({"opt_lr", lr});
      out.push_back({"opt_betas", betas});
      out.push_back({"opt_eps", o.eps});
      out.push_back({"opt_weight_decay", o.weight_decay});
      out.push_back({"opt_amsgrad", false});
      return;
    case OptimizerKind::sgd:
      out.push_back({"opt_lr", lr});
      out.push_back({"opt_momentum", o.momentum});
      return;
    case OptimizerKind::lars:
      // No reference logs LARS: crest's settings under crest's names.
      out.push_back({"opt_lr", lr});
      out.push_back({"opt_momentum", o.momentum});
      out.push_back({"opt_weight_decay", o.weight_decay});
      out.push_back({"opt_trust_coefficient", o.trust_coefficient});
      out.push_back({"opt_trust_eps", o.trust_eps});
      return;
    case OptimizerKind::larc:
      return;  // add_optimizer_keys: LARC's own keys, then its base's group
  }
}

void add_optimizer_keys(const OptimizerConfig& o, double lr, std::vector<MllogKey>& out) {
  out.push_back({"opt_name", optimizer_name(o.name)});
  if (o.name != OptimizerKind::larc) {
    add_group_keys(o, lr, out);
    return;
  }
  out.push_back({"opt_larc_base", optimizer_name(o.larc_base)});
  out.push_back({"opt_larc_mode", enum_name(o.larc_mode)});
  out.push_back({"opt_trust_coefficient", o.trust_coefficient});
  out.push_back({"opt_trust_eps", o.trust_eps});
  // The base's group, with the weight decay LARC applies.
  OptimizerConfig base = o;
  base.name = o.larc_base;
  add_group_keys(base, lr, out);
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
