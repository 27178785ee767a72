// A learning-rate schedule added the way docs/extending.md describes — one rate function and one
// registration line, here in the test binary — is read, checked and printed by the config
// loader, drives the trainer's rate, and is logged by the MLPerf keys, with no other file
// naming it.
#include "crest/optim/lr_schedule_registry.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>

#include "crest/core/error.hpp"
#include "crest/optim/lr_policy.hpp"
#include "crest/train/config.hpp"
#include "crest/train/optimizer_log_keys.hpp"
#include "crest/train/trainer.hpp"
#include "support/config_error.hpp"

namespace crest {
namespace {

// Exponential decay after the warmup: P g^(e - W), g the section's decay_rate (a key multistep
// reads too, to show a key shared between two types).
LrScheduleType exponential_type() {
  LrScheduleType t;
  t.name = "exponential";
  t.keys = {"decay_rate"};
  t.required = {"decay_rate"};
  t.validate = [](const StepLrSchedule& s) {
    if (!(s.decay_rate > 0 && s.decay_rate <= 1))
      throw_input("lr_schedule.decay_rate must be in (0, 1], got " + lr_setting_text(s.decay_rate));
  };
  t.rate = [](const StepLrSchedule& s, int64_t e) {
    return s.plateau() * std::pow(s.decay_rate, static_cast<double>(e - s.warmup_steps));
  };
  t.log_entries = [](const StepLrSchedule& s) {
    std::vector<LoggedEntry> out = {{"decay_rate", s.decay_rate}};
    for (LoggedEntry& e : warmup_log_entries(s)) out.push_back(std::move(e));
    return out;
  };
  return t;
}

CREST_REGISTER_LR_SCHEDULE(exponential, exponential_type());

const char* kTiny = R"(
data: {name: dummy, n_train: 4, n_valid: 2, sample_shape: [16, 16, 16, 4], batch_size: 2,
       n_epochs: 1, seed: 3}
model: {name: cosmoflow, conv_size: 2, n_conv_layers: 2, fc1_size: 8, fc2_size: 8, dropout: 0}
optimizer: {name: SGD}
lr_schedule: {start_lr: 0.1, type: exponential, decay_rate: 0.5, lr_warmup_steps: 2}
train: {checkpoint_every: 0}
crest: {backend: reference, threads: 1}
)";

std::string load_error(const std::vector<std::string>& overrides) {
  return test::config_load_error(kTiny, overrides);
}

TEST(LrScheduleRegistry, ARegisteredScheduleIsReadCheckedAndPrinted) {
  const Config c = load_config_text(kTiny, "tiny.yaml");
  EXPECT_TRUE(c.lr_schedule.per_step);
  EXPECT_EQ(c.lr_schedule.type, "exponential");
  const std::string yaml = to_yaml(c);
  EXPECT_NE(yaml.find("type: exponential"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("decay_rate: 0.5"), std::string::npos) << yaml;
  EXPECT_EQ(yaml.find("t_max"), std::string::npos) << "another type's key is not printed";
  const std::string again = to_yaml(load_config_text(yaml, "resolved.yaml"));
  EXPECT_EQ(again.substr(again.find('\n')), yaml.substr(yaml.find('\n')))
      << "the resolved text loads to the same settings (the first line names the source)";

  const std::string m = load_error({"lr_schedule.milestones=[3]"});
  EXPECT_NE(m.find("lr_schedule.milestones"), std::string::npos) << m;
  EXPECT_NE(m.find("not used by type: exponential (only by type: multistep)"), std::string::npos)
      << m;
  const std::string r = load_error({"lr_schedule.decay_rate=null"});
  EXPECT_NE(r.find("required key is missing (type: exponential)"), std::string::npos) << r;
  const std::string u = load_error({"lr_schedule.type=exponentia"});
  EXPECT_NE(u.find("cosine_annealing, exponential, multistep, none, polynomial"), std::string::npos)
      << "the unknown-type error lists every registered one: " << u;
  EXPECT_NE(load_error({"lr_schedule.t_max=5"}).find("only by type: cosine_annealing"),
            std::string::npos);
}

TEST(LrScheduleRegistry, ItDrivesTheRateAndIsLogged) {
  const Config c = load_config_text(kTiny, "tiny.yaml");
  const std::unique_ptr<LrPolicy> p = lr_policy_of(c.lr_schedule, 2);
  EXPECT_TRUE(p->per_step());
  // The shared warmup for e < W (e = step + 1), then the plateau P = warm(1) = 0.05, halving.
  EXPECT_DOUBLE_EQ(p->lr(0, 0), 0.05);
  EXPECT_DOUBLE_EQ(p->lr(1, 0), 0.05);
  EXPECT_DOUBLE_EQ(p->lr(2, 0), 0.025);
  EXPECT_DOUBLE_EQ(p->lr(4, 7), 0.00625) << "the epoch does not matter to a per-step schedule";

  std::vector<std::string> keys;
  for (const MllogKey& k : optimizer_log_keys(c)) keys.push_back(k.key);
  const std::vector<std::string> want = {"scheduler_type", "scheduler_decay_rate",
                                         "scheduler_lr_warmup_steps", "scheduler_lr_warmup_factor"};
  ASSERT_GE(keys.size(), want.size());
  EXPECT_EQ(std::vector<std::string>(keys.end() - static_cast<long>(want.size()), keys.end()),
            want);
}

TEST(LrScheduleRegistry, InvalidSettingsOfARegisteredTypeNameTheKey) {
  StepLrSchedule s;
  s.type = "exponential";
  s.start_lr = 0.1;
  s.decay_rate = 2;
  try {
    (void)s.lr(0);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lr_schedule.decay_rate"), std::string::npos) << e.what();
  }
  s.type = "nonesuch";
  EXPECT_THROW((void)s.lr(0), Error);
}

}  // namespace
}  // namespace crest
