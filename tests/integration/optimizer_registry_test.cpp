// An optimizer added the way docs/extending.md describes — one class and one registration line,
// here in the test binary — is read, checked and printed by the config loader, built by the
// trainer, and logged by the MLPerf keys, with no other file naming it.
#include "crest/optim/optimizer_registry.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>

#include "crest/core/error.hpp"
#include "crest/train/config.hpp"
#include "crest/train/optimizer_log_keys.hpp"
#include "crest/train/trainer.hpp"
#include "support/cli_util.hpp"
#include "support/config_error.hpp"

namespace crest {
namespace {

// Sign descent: w -= lr sign(g). What the trainer did with it is kept for the test to read.
struct SignRecord {
  int steps = 0;
  double last_lr = 0;
  double step_size = 0;  // the optimizer's own setting (the section's trust_coefficient)
};
SignRecord sign_record;

class SignSgd : public Optimizer {
 public:
  explicit SignSgd(double step_size) : step_size_(step_size) {}
  std::string name() const override { return "signsgd"; }
  void step(double lr) override {
    CREST_CHECK(params_->dtype() == DType::f32 && params_->memory().is_host(),
                "SignSgd steps float32 host parameters");
    auto* w = static_cast<float*>(params_->values());
    const auto* g = static_cast<const float*>(params_->grads());
    for (size_t i = 0; i < count_; ++i)
      w[i] -= static_cast<float>(lr * step_size_ * ((g[i] > 0) - (g[i] < 0)));
    ++steps_;
    ++sign_record.steps;
    sign_record.last_lr = lr;
    sign_record.step_size = step_size_;
  }

 protected:
  std::vector<std::string> state_names() const override { return {}; }

 private:
  double step_size_;
};

OptimizerType sign_sgd_type() {
  OptimizerType t;
  t.name = "SignSGD";
  t.log_name = "signsgd";
  t.keys = {"trust_coefficient"};  // reused as the step size, to show a key routed to it
  t.default_lr = 0.02;
  t.set_defaults = [](OptimizerConfig& o) { o.trust_coefficient = 0.5; };
  t.make = [](const OptimizerConfig& o) { return std::make_unique<SignSgd>(o.trust_coefficient); };
  t.parameter_group = [](const OptimizerConfig& o, double lr) {
    return std::vector<LoggedEntry>{{"lr", lr}, {"step_size", o.trust_coefficient}};
  };
  return t;
}

CREST_REGISTER_OPTIMIZER(sign_sgd, sign_sgd_type());

const char* kTiny = R"(
data: {name: dummy, n_train: 4, n_valid: 2, sample_shape: [16, 16, 16, 4], batch_size: 2,
       n_epochs: 1, seed: 3}
model: {name: cosmoflow, conv_size: 2, n_conv_layers: 2, fc1_size: 8, fc2_size: 8, dropout: 0}
optimizer: {name: signsgd}
train: {checkpoint_every: 0}
crest: {backend: reference, threads: 1}
)";

std::string load_error(const std::vector<std::string>& overrides) {
  return test::config_load_error(kTiny, overrides);
}

TEST(OptimizerRegistry, ARegisteredOptimizerIsReadCheckedAndPrinted) {
  const Config c = load_config_text(kTiny, "tiny.yaml");
  EXPECT_EQ(c.optimizer.name, "SignSGD") << "the registered spelling, matched case-insensitively";
  EXPECT_DOUBLE_EQ(c.optimizer.trust_coefficient, 0.5) << "its set_defaults ran";
  EXPECT_DOUBLE_EQ(c.lr_schedule.base_lr, 0.02) << "its default learning rate";
  const std::string yaml = to_yaml(c);
  EXPECT_NE(yaml.find("name: SignSGD"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("trust_coefficient: 0.5"), std::string::npos) << yaml;
  EXPECT_EQ(yaml.find("momentum"), std::string::npos) << "a key it does not take is not printed";
  const std::string again = to_yaml(load_config_text(yaml, "resolved.yaml"));
  EXPECT_EQ(again.substr(again.find('\n')), yaml.substr(yaml.find('\n')))
      << "the resolved text loads to the same settings (the first line names the source)";

  const std::string m = load_error({"optimizer.momentum=0.9"});
  EXPECT_NE(m.find("optimizer.momentum"), std::string::npos) << m;
  EXPECT_NE(m.find("not used by SignSGD"), std::string::npos) << m;
  const std::string u = load_error({"optimizer.name=SignSGDX"});
  EXPECT_NE(u.find("SignSGD"), std::string::npos) << "the unknown-name error lists it: " << u;
  const std::string b = load_error({"optimizer={name: LARC, larc_base: SignSGD}"});
  EXPECT_NE(b.find("optimizer.larc_base"), std::string::npos) << b;
  EXPECT_NE(b.find("Adam, AdamW, SGD"), std::string::npos) << "only wrappable ones: " << b;
}

TEST(OptimizerRegistry, ItsParameterGroupIsLogged) {
  const Config c = load_config_text(kTiny, "tiny.yaml", {"optimizer.trust_coefficient=0.25"});
  const std::vector<MllogKey> keys = optimizer_log_keys(c);
  ASSERT_GE(keys.size(), 3u);
  EXPECT_EQ(keys[0].key, "opt_name");
  EXPECT_EQ(keys[0].value, "SignSGD");
  EXPECT_EQ(keys[1].key, "opt_lr");
  EXPECT_EQ(keys[1].value, 0.02);
  EXPECT_EQ(keys[2].key, "opt_step_size");
  EXPECT_EQ(keys[2].value, 0.25);
}

TEST(OptimizerRegistry, TheTrainerStepsWithIt) {
  test::TempDir d;
  const Config c = load_config_text(
      kTiny, "tiny.yaml", {"output_dir=" + d.file("run"), "optimizer.trust_coefficient=2"});
  sign_record = {};
  std::ostringstream log;
  const TrainSummary s = run_training(c, TrainOptions{}, log);
  EXPECT_EQ(s.steps, 2) << log.str();
  EXPECT_EQ(sign_record.steps, 2) << "every step went through the registered optimizer";
  EXPECT_DOUBLE_EQ(sign_record.last_lr, 0.02);
  EXPECT_DOUBLE_EQ(sign_record.step_size, 2.0);
  EXPECT_TRUE(std::isfinite(s.epochs.at(0).train_loss));
}

}  // namespace
}  // namespace crest
