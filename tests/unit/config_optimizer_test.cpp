// The optimizer and lr_schedule sections' DeepCAM keys (the reference's argument names in
// crest's sections): LAMB and its defaults, optimizer_betas, the per-step schedule family beside
// CosmoFlow's per-epoch one, train.gradient_accumulation_frequency; every mistake exits 2 naming
// the key.
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "crest/core/error.hpp"
#include "crest/train/config.hpp"
#include "crest/train/trainer.hpp"

namespace crest {
namespace {

const char* kSource = "deepcam-like.yaml";

// The reference 2048 closed-division optimizer settings on a small model.
const char* kLamb = R"(output_dir: runs/lamb
data:
    name: dummy
    n_train: 16
    n_valid: 8
    sample_shape: [32, 32, 32, 4]
    batch_size: 4
    n_epochs: 2
model:
    name: cosmoflow
optimizer:
    name: LAMB
    optimizer_betas: [0.9, 0.999]
    weight_decay: 0.01
lr_schedule:
    start_lr: 0.0055
    type: multistep
    milestones: [800]
    decay_rate: 0.1
    lr_warmup_steps: 400
    lr_warmup_factor: 1.0
train:
    gradient_accumulation_frequency: 2
)";

Config load(const std::vector<std::string>& overrides = {}) {
  return load_config_text(kLamb, kSource, overrides);
}

std::string body(const std::string& y) { return y.substr(y.find("\noutput_dir:")); }

// The resolved YAML loads to the same configuration.
void expect_round_trip(const Config& c) {
  const Config again = load_config_text(c.resolved_yaml, "resolved.yaml");
  EXPECT_EQ(body(again.resolved_yaml), body(c.resolved_yaml));
}

void expect_error(const std::vector<std::string>& overrides,
                  std::initializer_list<std::string> needles) {
  try {
    (void)load(overrides);
    ADD_FAILURE() << "no error; expected one mentioning '" << *needles.begin() << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2) << e.what();
    EXPECT_NE(std::string(e.what()).find(kSource), std::string::npos) << e.what();
    for (const auto& n : needles)
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos)
          << "message: " << e.what() << "\nmissing: " << n;
  }
}

TEST(ConfigOptimizer, LoadsTheReferenceLambSettings) {
  const Config c = load();
  EXPECT_EQ(c.optimizer.name, "LAMB");
  EXPECT_DOUBLE_EQ(c.optimizer.beta1, 0.9);
  EXPECT_DOUBLE_EQ(c.optimizer.beta2, 0.999);
  EXPECT_DOUBLE_EQ(c.optimizer.eps, 1e-6);  // LAMB's default: the reference's
  EXPECT_DOUBLE_EQ(c.optimizer.weight_decay, 0.01);
  EXPECT_DOUBLE_EQ(c.optimizer.max_grad_norm, 1.0);
  const LrScheduleConfig& l = c.lr_schedule;
  EXPECT_TRUE(l.per_step);
  EXPECT_EQ(l.type, "multistep");
  EXPECT_DOUBLE_EQ(l.start_lr, 0.0055);
  EXPECT_EQ(l.milestones, std::vector<int64_t>{800});
  EXPECT_DOUBLE_EQ(l.decay_rate, 0.1);
  EXPECT_EQ(l.lr_warmup_steps, 400);
  EXPECT_DOUBLE_EQ(l.lr_warmup_factor, 1.0);
  EXPECT_FALSE(l.closed_form);
  EXPECT_EQ(c.train.gradient_accumulation_frequency, 2);
  // The schedule the trainer asks: the reference 2048 numbers.
  const auto policy = lr_policy_of(l, 8);
  EXPECT_TRUE(policy->per_step());
  EXPECT_DOUBLE_EQ(policy->lr(0, 0), 1.375e-5);
  EXPECT_DOUBLE_EQ(policy->lr(1199, 3), 0.00548625);
  EXPECT_DOUBLE_EQ(policy->lr(1200, 3), 0.000548625);
  for (const char* line :
       {"name: LAMB", "betas: [0.9, 0.999]", "eps: 1.0e-06", "max_grad_norm: 1.0",
        "start_lr: 0.0055", "type: multistep", "milestones: [800]", "lr_warmup_steps: 400",
        "gradient_accumulation_frequency: 2"})
    EXPECT_NE(c.resolved_yaml.find(line), std::string::npos) << line << "\n" << c.resolved_yaml;
  // The per-epoch family's keys are not printed for a per-step schedule.
  EXPECT_EQ(c.resolved_yaml.find("base_lr"), std::string::npos) << c.resolved_yaml;
  expect_round_trip(c);
}

TEST(ConfigOptimizer, OtherScheduleShapesLoadAndRoundTrip) {
  Config c = load({"lr_schedule={start_lr: 0.00155, type: cosine_annealing, t_max: 9000}"});
  EXPECT_EQ(c.lr_schedule.type, "cosine_annealing");
  EXPECT_EQ(c.lr_schedule.t_max, 9000);
  EXPECT_DOUBLE_EQ(c.lr_schedule.eta_min, 0.0);
  EXPECT_EQ(c.lr_schedule.lr_warmup_steps, 0);
  EXPECT_DOUBLE_EQ(lr_policy_of(c.lr_schedule, 8)->lr(0, 0), 0.00155);
  expect_round_trip(c);

  c = load({"lr_schedule={start_lr: 0.001}"});  // no type: constant
  EXPECT_TRUE(c.lr_schedule.per_step);
  EXPECT_EQ(c.lr_schedule.type, "none");
  EXPECT_DOUBLE_EQ(lr_policy_of(c.lr_schedule, 8)->lr(5000, 9), 0.001);
  expect_round_trip(c);

  c = load({"lr_schedule.closed_form=true", "lr_schedule.lr_warmup_factor=2"});
  EXPECT_TRUE(c.lr_schedule.closed_form);
  EXPECT_NE(c.resolved_yaml.find("closed_form: true"), std::string::npos);
  EXPECT_DOUBLE_EQ(lr_policy_of(c.lr_schedule, 8)->lr(399, 0), 0.0055);  // no plateau
  expect_round_trip(c);

  // The per-epoch family is untouched (CosmoFlow's reference keys).
  c = load({"lr_schedule={base_lr: 0.001, scaling: linear, base_batch_size: 64}"});
  EXPECT_FALSE(c.lr_schedule.per_step);
  EXPECT_FALSE(lr_policy_of(c.lr_schedule, 128)->per_step());
  EXPECT_DOUBLE_EQ(lr_policy_of(c.lr_schedule, 128)->lr(0, 0), 0.002);
  expect_round_trip(c);
}

TEST(ConfigOptimizer, DefaultsFollowTheOptimizer) {
  Config c = load({"optimizer={name: LAMB}"});
  EXPECT_DOUBLE_EQ(c.optimizer.eps, 1e-6);
  EXPECT_DOUBLE_EQ(c.optimizer.weight_decay, 1e-6);  // the reference's --weight_decay
  EXPECT_DOUBLE_EQ(c.optimizer.max_grad_norm, 1.0);
  c = load({"optimizer={name: Adam}"});
  EXPECT_DOUBLE_EQ(c.optimizer.eps, 1e-7);  // Keras', CosmoFlow's framework
  EXPECT_DOUBLE_EQ(c.optimizer.weight_decay, 0.0);
  EXPECT_EQ(c.resolved_yaml.find("max_grad_norm"), std::string::npos);
  c = load({"optimizer={name: AdamW, eps: 1.0e-6, optimizer_betas: [0.8, 0.9]}"});
  EXPECT_DOUBLE_EQ(c.optimizer.eps, 1e-6);
  EXPECT_DOUBLE_EQ(c.optimizer.beta1, 0.8);
  EXPECT_DOUBLE_EQ(c.optimizer.weight_decay, 0.01);
  c = load({"train.gradient_accumulation_frequency=null"});
  EXPECT_EQ(c.train.gradient_accumulation_frequency, 1);
}

TEST(ConfigOptimizer, OptimizerMistakesNameTheKey) {
  expect_error({"optimizer.name=RMSprop"}, {"optimizer.name", "LAMB"});
  expect_error({"optimizer={name: Adam, max_grad_norm: 1.0}"},
               {"optimizer.max_grad_norm", "not used by Adam"});
  expect_error({"optimizer.max_grad_norm=0"}, {"optimizer.max_grad_norm", "positive"});
  expect_error({"optimizer.betas=[0.9, 0.99]"}, {"optimizer.optimizer_betas", "same setting"});
  expect_error({"optimizer.optimizer_betas=[0.9]"},
               {"optimizer.optimizer_betas", "[beta1, beta2]"});
  expect_error({"optimizer.optimizer_betas=[0.9, 1.0]"}, {"optimizer.optimizer_betas", "[0, 1)"});
  expect_error({"optimizer.weight_decay=-0.1"}, {"optimizer.weight_decay", "negative"});
  expect_error({"optimizer.momentum=0.9"}, {"optimizer.momentum", "not used by LAMB"});
  expect_error({"optimizer.lr=0.1"}, {"optimizer.lr", "lr_schedule.start_lr"});
  expect_error({"optimizer={name: SGD, nesterov: true}"},
               {"optimizer.nesterov", "needs optimizer.momentum above 0"});
  expect_error({"optimizer={name: LARC, larc_base: SGD, nesterov: true}"},
               {"optimizer.nesterov", "needs optimizer.momentum above 0"});
  expect_error({"optimizer={name: LARS, momentum: 0.9, nesterov: true}"},
               {"optimizer.nesterov", "not used by LARS"});
}

// LARS and LARC: the trust coefficient's default follows the name (timm's, apex's), the
// exclusions stay the lenient defaults unless given, LARC's base takes momentum or betas.
TEST(ConfigOptimizer, LarsAndLarcLoadAndRoundTrip) {
  Config c = load({"optimizer={name: LARS, momentum: 0.9, weight_decay: 5.0e-4}"});
  const OptimizerConfig& o = c.optimizer;
  EXPECT_EQ(o.name, "LARS");
  EXPECT_DOUBLE_EQ(o.trust_coefficient, 0.001);
  EXPECT_DOUBLE_EQ(o.trust_eps, 1e-8);
  EXPECT_DOUBLE_EQ(o.momentum, 0.9);
  EXPECT_DOUBLE_EQ(o.weight_decay, 5e-4);
  EXPECT_FALSE(o.lars_exclude.has_value());
  EXPECT_TRUE(o.uses_momentum());
  for (const char* line : {"name: LARS", "momentum: 0.9", "trust_coefficient: 0.001",
                           "trust_eps: 1.0e-08", "# lars_exclude: [\"*.bias\", \"*.bn.weight\"]"})
    EXPECT_NE(c.resolved_yaml.find(line), std::string::npos) << line << "\n" << c.resolved_yaml;
  EXPECT_EQ(c.resolved_yaml.find("betas"), std::string::npos) << c.resolved_yaml;
  expect_round_trip(c);
  EXPECT_FALSE(load_config_text(c.resolved_yaml, "resolved.yaml").optimizer.lars_exclude);
  EXPECT_EQ(o.lars_momentum_form, LarsMomentumForm::torch);
  EXPECT_NE(c.resolved_yaml.find("momentum_form: torch"), std::string::npos) << c.resolved_yaml;

  c = load({"optimizer={name: LARS, momentum: 0.9, momentum_form: keras}"});
  EXPECT_EQ(c.optimizer.lars_momentum_form, LarsMomentumForm::keras);
  EXPECT_NE(c.resolved_yaml.find("momentum_form: keras"), std::string::npos) << c.resolved_yaml;
  expect_round_trip(c);

  c =
      load({"optimizer={name: LARC, larc_base: Adam, larc_mode: scale, weight_decay: 0.01, "
            "lars_exclude: ['*.bias', 'fc?.weight'], betas: [0.8, 0.99], trust_eps: 0}"});
  EXPECT_EQ(c.optimizer.name, "LARC");
  EXPECT_EQ(c.optimizer.larc_base, "Adam");
  EXPECT_EQ(c.optimizer.larc_mode, LarcMode::scale);
  EXPECT_DOUBLE_EQ(c.optimizer.trust_coefficient, 0.02);  // apex's default
  EXPECT_DOUBLE_EQ(c.optimizer.trust_eps, 0.0);
  EXPECT_DOUBLE_EQ(c.optimizer.beta1, 0.8);
  EXPECT_FALSE(c.optimizer.uses_momentum());
  EXPECT_EQ(c.optimizer.lars_exclude, (std::vector<std::string>{"*.bias", "fc?.weight"}));
  for (const char* line : {"name: LARC", "larc_base: Adam", "larc_mode: scale",
                           "betas: [0.8, 0.99]", "lars_exclude: [\"*.bias\", \"fc?.weight\"]"})
    EXPECT_NE(c.resolved_yaml.find(line), std::string::npos) << line << "\n" << c.resolved_yaml;
  expect_round_trip(c);

  c = load({"optimizer={name: LARC, larc_base: SGD, momentum: 0.9, lars_exclude: []}"});
  EXPECT_EQ(c.optimizer.larc_mode, LarcMode::clip);  // apex's default
  EXPECT_EQ(c.optimizer.lars_exclude, std::vector<std::string>{});
  EXPECT_NE(c.resolved_yaml.find("lars_exclude: []"), std::string::npos) << c.resolved_yaml;
  expect_round_trip(c);
}

TEST(ConfigOptimizer, LarsAndLarcMistakesNameTheKey) {
  expect_error({"optimizer={name: LARS, trust_coefficient: 0}"},
               {"optimizer.trust_coefficient", "positive"});
  expect_error({"optimizer={name: LARS, trust_eps: -1}"}, {"optimizer.trust_eps", "negative"});
  expect_error({"optimizer={name: LARS, eps: 1.0e-8}"},
               {"optimizer.eps", "not used by LARS", "trust_eps"});
  expect_error({"optimizer={name: LARS, momentum: 1.0}"}, {"optimizer.momentum", "[0, 1)"});
  expect_error({"optimizer={name: LARS, larc_mode: clip}"},
               {"optimizer.larc_mode", "not used by LARS"});
  expect_error({"optimizer={name: LARS, momentum_form: tf}"},
               {"optimizer.momentum_form", "torch, keras"});
  expect_error({"optimizer={name: SGD, momentum_form: keras}"},
               {"optimizer.momentum_form", "not used by SGD", "(only LARS"});
  expect_error({"optimizer={name: LARC, larc_base: SGD, momentum_form: keras}"},
               {"optimizer.momentum_form", "not used by LARC"});
  expect_error({"optimizer={name: LARS, lars_exclude: '*.bias'}"},
               {"optimizer.lars_exclude", "list of glob patterns"});
  expect_error({"optimizer={name: LARS, lars_exclude: ['*.bias', '']}"},
               {"optimizer.lars_exclude[1]", "non-empty"});
  expect_error({"optimizer={name: LARS, lars_exclude: [[1]]}"}, {"optimizer.lars_exclude[0]"});
  expect_error({"optimizer={name: Adam, trust_coefficient: 0.01}"},
               {"optimizer.trust_coefficient", "not used by Adam"});
  expect_error({"optimizer={name: SGD, lars_exclude: []}"},
               {"optimizer.lars_exclude", "not used by SGD"});
  // SGD's weight decay spares the tensors weight_decay_exclude names (MLPerf ResNet-50's recipe);
  // the list is SGD's alone.
  const Config sgd =
      load({"optimizer={name: SGD, momentum: 0.9, weight_decay: 5.0e-5, "
            "weight_decay_exclude: [\"*.bias\"]}"});
  EXPECT_DOUBLE_EQ(sgd.optimizer.weight_decay, 5e-5);
  EXPECT_EQ(*sgd.optimizer.weight_decay_exclude, std::vector<std::string>{"*.bias"});
  expect_error({"optimizer={name: Adam, weight_decay_exclude: []}"},
               {"optimizer.weight_decay_exclude", "not used by Adam", "(only SGD"});
  expect_error({"optimizer={name: SGD, weight_decay_exclude: [[1]]}"},
               {"optimizer.weight_decay_exclude[0]"});
  EXPECT_EQ(load({"optimizer={name: SGD, momentum: 0.9, weight_decay: 0}"}).optimizer.name, "SGD")
      << "0, which resolved configs print, means none";
  expect_error({"optimizer={name: LARC}"},
               {"optimizer.larc_base", "required", "(Adam, AdamW, SGD)"});
  expect_error({"optimizer={name: LARC, larc_base: LAMB}"},
               {"optimizer.larc_base", "unknown value \"LAMB\"", "Adam, AdamW, SGD"});
  expect_error({"optimizer={name: LARC, larc_base: Adam, larc_mode: clamp}"},
               {"optimizer.larc_mode", "clip, scale"});
  expect_error({"optimizer={name: LARC, larc_base: Adam, momentum: 0.9}"},
               {"optimizer.momentum", "not used by LARC", "LARC over SGD"});
  expect_error({"optimizer={name: LARC, larc_base: SGD, betas: [0.9, 0.99]}"},
               {"optimizer.betas", "not used by LARC", "LARC over Adam, LARC over AdamW"});
}

TEST(ConfigOptimizer, ScheduleMistakesNameTheKey) {
  expect_error({"lr_schedule.base_lr=0.001"}, {"lr_schedule.base_lr", "per-step", "start_lr"});
  expect_error({"lr_schedule.start_lr=0"}, {"lr_schedule.start_lr", "positive"});
  expect_error({"lr_schedule.decay_rate=1.5"}, {"lr_schedule.decay_rate", "must be in (0, 1.0]"});
  expect_error({"lr_schedule.decay_rate=0"}, {"lr_schedule.decay_rate", "must be in (0, 1.0]"});
  expect_error({"lr_schedule.milestones=[800, 400]"}, {"lr_schedule.milestones", "increasing"});
  expect_error({"lr_schedule.milestones=[-1]"}, {"lr_schedule.milestones"});
  expect_error({"lr_schedule.lr_warmup_factor=0.5"}, {"lr_schedule.lr_warmup_factor", ">= 1"});
  expect_error({"lr_schedule.lr_warmup_steps=-1"}, {"lr_schedule.lr_warmup_steps"});
  expect_error({"lr_schedule.type=linear"},
               {"lr_schedule.type", "cosine_annealing", "multistep", "none"});
  expect_error({"lr_schedule.t_max=10"}, {"lr_schedule.t_max", "not used by type: multistep"});
  expect_error({"lr_schedule.eta_min=0"}, {"lr_schedule.eta_min", "not used by type: multistep"});
  expect_error({"lr_schedule.warmup=3"}, {"lr_schedule.warmup", "unknown key"});
  expect_error({"lr_schedule={type: multistep, milestones: [1], decay_rate: 0.1}"},
               {"lr_schedule.start_lr", "required"});
  expect_error({"lr_schedule={start_lr: 0.1, type: multistep, decay_rate: 0.1}"},
               {"lr_schedule.milestones", "required"});
  expect_error({"lr_schedule={start_lr: 0.1, type: multistep, milestones: [0], decay_rate: 0.1}"},
               {"lr_schedule.milestones", "milestone 0"});
  expect_error({"lr_schedule={start_lr: 0.001, lr_warmup_steps: 10}"},
               {"lr_schedule.lr_warmup_steps", "not used by type: none"});
  expect_error({"lr_schedule={start_lr: 0.001, type: cosine_annealing}"},
               {"lr_schedule.t_max", "required"});
  for (const char* bad : {"t_max: 0", "t_max: 5, eta_min: -1", "t_max: 5, closed_form: true",
                          "t_max: 5, milestones: [3]"})
    expect_error(
        {"lr_schedule={start_lr: 0.001, type: cosine_annealing, " + std::string(bad) + "}"},
        {"lr_schedule."});
  expect_error({"lr_schedule={start_lr: 0.001, type: cosine_annealing, t_max: 5, closed_form: "
                "true}"},
               {"lr_schedule.closed_form", "only by type: multistep"});
}

TEST(ConfigOptimizer, AccumulationMistakesNameTheKey) {
  expect_error({"train.gradient_accumulation_frequency=0"},
               {"train.gradient_accumulation_frequency"});
  expect_error({"train.checkpoint_every=3 steps"},
               {"train.checkpoint_every", "multiple of gradient_accumulation_frequency 2"});
  EXPECT_NO_THROW(load({"train.checkpoint_every=4 steps"}));
  // Epochs may end inside a window: the trainer shares the partial sum into the checkpoint.
  EXPECT_NO_THROW(load({"train.checkpoint_every=3"}));
}

}  // namespace
}  // namespace crest
