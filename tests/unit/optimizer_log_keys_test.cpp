// The DeepCAM reference's optimizer and scheduler MLPerf keys, in its order, with its value types
// (floats stay floats, integers integers, as the checker reads them).
#include "crest/train/optimizer_log_keys.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace crest {
namespace {

const char* kBase =
    R"(data: {name: dummy, n_train: 8, sample_shape: [32, 32, 32, 4], batch_size: 4, n_epochs: 1}
model: {name: cosmoflow}
)";

std::vector<MllogKey> keys_of(const std::string& sections) {
  return optimizer_log_keys(load_config_text(kBase + sections, "keys.yaml"));
}

std::string text(const std::vector<MllogKey>& keys) {
  std::string out;
  for (const auto& k : keys) out += k.key + "=" + mllog_json(k.value) + " ";
  return out;
}

TEST(OptimizerLogKeys, LambWithWarmupAndMultistep) {
  const auto keys = keys_of(
      "optimizer: {name: LAMB, weight_decay: 0.01}\n"
      "lr_schedule: {start_lr: 0.0055, type: multistep, milestones: [800], decay_rate: 0.1, "
      "lr_warmup_steps: 400, lr_warmup_factor: 1.0}\n");
  EXPECT_EQ(text(keys),
            "opt_name=\"LAMB\" opt_lr=0.0055 opt_bias_correction=true opt_betas=[0.9, 0.999] "
            "opt_eps=1e-06 opt_weight_decay=0.01 opt_grad_averaging=true opt_max_grad_norm=1.0 "
            "scheduler_type=\"multistep\" scheduler_milestones=[800] scheduler_decay_rate=0.1 "
            "scheduler_lr_warmup_steps=400 scheduler_lr_warmup_factor=1.0 ");
}

TEST(OptimizerLogKeys, AdamWithCosineAndClosedFormFlag) {
  auto keys = keys_of(
      "optimizer: {name: AdamW, eps: 1.0e-6, weight_decay: 1.0e-6}\n"
      "lr_schedule: {start_lr: 0.00155, type: cosine_annealing, t_max: 9000}\n");
  EXPECT_EQ(text(keys),
            "opt_name=\"AdamW\" opt_lr=0.00155 opt_betas=[0.9, 0.999] opt_eps=1e-06 "
            "opt_weight_decay=1e-06 opt_amsgrad=false scheduler_type=\"cosine_annealing\" "
            "scheduler_t_max=9000 scheduler_eta_min=0.0 scheduler_lr_warmup_steps=0 "
            "scheduler_lr_warmup_factor=1.0 ");
  keys = keys_of(
      "optimizer: {name: LAMB}\n"
      "lr_schedule: {start_lr: 0.004, type: multistep, milestones: [1100, 4096], decay_rate: 0.1, "
      "lr_warmup_steps: 200, closed_form: true}\n");
  EXPECT_EQ(keys.back().key, "scheduler_closed_form");
}

// LARS and LARC: crest's settings; LARC's base group follows its own settings.
TEST(OptimizerLogKeys, LarsAndLarc) {
  const std::string schedule = "lr_schedule: {start_lr: 0.1}\n";
  EXPECT_EQ(
      text(keys_of("optimizer: {name: LARS, momentum: 0.9, weight_decay: 5.0e-4}\n" + schedule)),
      "opt_name=\"LARS\" opt_lr=0.1 opt_momentum=0.9 opt_weight_decay=0.0005 "
      "opt_trust_coefficient=0.001 opt_trust_eps=1e-08 ");
  EXPECT_EQ(
      text(keys_of("optimizer: {name: LARC, larc_base: Adam, larc_mode: scale}\n" + schedule)),
      "opt_name=\"LARC\" opt_larc_base=\"Adam\" opt_larc_mode=\"scale\" "
      "opt_trust_coefficient=0.02 opt_trust_eps=1e-08 opt_lr=0.1 opt_betas=[0.9, 0.999] "
      "opt_eps=1e-07 opt_weight_decay=0.0 opt_amsgrad=false ");
}

// Without a type the reference builds no scheduler and logs no scheduler keys.
TEST(OptimizerLogKeys, NoSchedulerKeysWithoutAType) {
  const auto keys = keys_of("optimizer: {name: Adam}\nlr_schedule: {start_lr: 0.001}\n");
  EXPECT_EQ(text(keys),
            "opt_name=\"Adam\" opt_lr=0.001 opt_betas=[0.9, 0.999] opt_eps=1e-07 "
            "opt_weight_decay=0.0 opt_amsgrad=false ");
}

}  // namespace
}  // namespace crest
