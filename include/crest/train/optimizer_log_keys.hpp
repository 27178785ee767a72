// The optimizer's and the learning-rate scheduler's MLPerf log keys as the DeepCAM reference
// writes them (train.py, utils/optimizer_helpers.py; reference/DEEPCAM.md "MLPerf log keys"):
// opt_name, then opt_<key> for every key of the optimizer's parameter group (apex FusedLAMB:
// lr, bias_correction, betas, eps, weight_decay, grad_averaging, max_grad_norm; torch Adam and
// AdamW: lr, betas, eps, weight_decay, amsgrad), then, when the run has a scheduler (a per-step
// lr_schedule with a type), scheduler_<key> in the reference's order: type, milestones and
// decay_rate or t_max and eta_min, lr_warmup_steps, lr_warmup_factor.
#pragma once
#include <string>
#include <vector>

#include "crest/train/config.hpp"
#include "crest/train/mllog.hpp"

namespace crest {

struct MllogKey {
  std::string key;
  MllogValue value;
};

// The keys for `config`, in the order they are logged. opt_lr is the start rate (start_lr, or
// base_lr for the per-epoch family): the reference logs the parameter group before its scheduler
// touches it. crest's closed_form is logged as scheduler_closed_form, and only when set.
std::vector<MllogKey> optimizer_log_keys(const Config& config);

// MLPerf Training's ResNet-50 hyperparameter keys (compliance_checker training_4.0.0
// closed_resnet.yaml, training_3.1.0 closed_resnet_{sgd,lars}.yaml): opt_name (sgd or lars), then
// <opt>_opt_base_learning_rate, the polynomial schedule's end rate, power and decay steps, the
// weight decay and momentum, the warmup in epochs (`steps_per_epoch` converts lr_warmup_steps),
// lars_epsilon (LARS's trust_eps) and model_bn_span (the samples one batch norm sees). The
// schedule keys come only from a polynomial lr_schedule, the one the rules allow.
std::vector<MllogKey> resnet_log_keys(const Config& config, int64_t steps_per_epoch);

}  // namespace crest
