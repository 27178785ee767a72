// The settings of the optimizer section (`optimizer:` in a run config), read and printed by
// src/train/config/optimizer.cpp. One vocabulary for every registered optimizer: each takes the
// keys its registry entry names (crest/optim/optimizer_registry.hpp) and refuses the others.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "crest/core/enum_table.hpp"
#include "crest/optim/larc.hpp"
#include "crest/optim/lars.hpp"

namespace crest {

template <>
inline constexpr EnumEntries<LarcMode, 2> kEnumTable<LarcMode> = {
    {{LarcMode::clip, "clip"}, {LarcMode::scale, "scale"}}};
template <>
inline constexpr EnumEntries<LarsMomentumForm, 2> kEnumTable<LarsMomentumForm> = {
    {{LarsMomentumForm::torch, "torch"}, {LarsMomentumForm::keras, "keras"}}};

struct OptimizerConfig {
  // A registered optimizer's name, as registered ("SGD", "AdamW"): the config reader matches the
  // given spelling case-insensitively and stores this one.
  std::string name = "SGD";
  // No learning rate here: lr_schedule.base_lr is the one source of truth. The reference's
  // optimizer.lr (its --lr flag) is accepted only without an lr_schedule section (the schedule
  // would overwrite it every epoch) and becomes lr_schedule.base_lr with scaling none.
  double momentum = 0;    // SGD (Keras form), LARS
  bool nesterov = false;  // SGD only
  // Adam/AdamW/LAMB: `betas: [b1, b2]` (DeepCAM's optimizer_betas, CosmoFlow's Keras
  // beta_1/beta_2 are the same setting).
  double beta1 = 0.9, beta2 = 0.999;
  // Keras' default (CosmoFlow's framework) for Adam/AdamW; LAMB 1e-6, the DeepCAM reference's
  // (which uses 1e-6 for its Adam and AdamW too: DeepCAM configs set it). `epsilon` too.
  double eps = 1e-7;
  double weight_decay = 0;     // default 0; AdamW 0.01; LAMB 1e-6 (the reference's --weight_decay)
  double max_grad_norm = 1.0;  // LAMB only: the global gradient-norm clip (apex's default)
  // LARS and LARC (crest-only keys; crest/optim/lars.hpp, larc.hpp): the trust coefficient eta
  // (LARS 0.001, timm's; LARC 0.02, apex's), the trust ratio's eps, and the tensors left alone:
  // glob patterns on parameter names, unset for default_lars_exclusions() (which, unlike a
  // given list, may match nothing).
  double trust_coefficient = 0.001;
  double trust_eps = 1e-8;
  std::optional<std::vector<std::string>> lars_exclude;
  // LARS only: where the rate sits in the momentum, torch's form (timm's Lars, the default) or
  // keras (the MLPerf ResNet-50 TF2 reference's LARSOptimizer); crest/optim/lars.hpp.
  LarsMomentumForm lars_momentum_form = LarsMomentumForm::torch;
  // SGD only: the tensors without weight decay, glob patterns as lars_exclude's, the same
  // defaults when unset.
  std::optional<std::vector<std::string>> weight_decay_exclude;
  // LARC only: clip or scale (apex's clip=True/False), and the optimizer it wraps (a registered
  // name whose entry allows wrapping: SGD, Adam or AdamW).
  LarcMode larc_mode = LarcMode::clip;
  std::string larc_base = "SGD";

  // Whether this optimizer (a wrapper: with its base) reads `key` of the section. False for the
  // keys every optimizer reads (name, lr) and for an unregistered name.
  bool takes(const std::string& key) const;
  // What the update is built on: SGD's momentum (SGD, LARS, LARC over SGD) or Adam's moments
  // (betas, eps: Adam, AdamW, LAMB, LARC over Adam or AdamW).
  bool uses_momentum() const { return takes("momentum"); }
};

}  // namespace crest
