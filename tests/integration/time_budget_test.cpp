// The time budget (train.max_wall_time, SLURM_JOB_END_TIME; docs/checkpoints.md): the run stops
// with a checkpoint while the measured step and checkpoint times still fit, says how much budget
// was left and how to resume, exits 75, and the resumed run ends bit-identical to a straight one.
// The test hook CREST_TEST_SECONDS_PER_STEP makes each step count as 1000 s on the budget's
// clock, so where the run stops does not depend on the machine's speed.
#include <gtest/gtest.h>

#include <ctime>
#include <nlohmann/json.hpp>
#include <string>

#include "crest/train/checkpoint.hpp"
#include "support/cli_util.hpp"
#include "support/tiny_run.hpp"
#include "support/weights_compare.hpp"

namespace {

using crest::test::CliRun;
using crest::test::run_crest;
using crest::test::run_shell;
using crest::test::TempDir;
using crest::test::tiny_cosmoflow_args;

CliRun crest_with_clock(const std::string& env, const std::string& args) {
  return run_shell("CREST_TEST_SECONDS_PER_STEP=1000 " + env + " " + CREST_BINARY + " " + args +
                   " 2>&1");
}

TEST(TimeBudget, StopsBeforeTheLimitAndTheResumeIsBitIdentical) {
  TempDir d;
  const std::string run = d.file("run");
  // 2 h = 7200 s at 1000 s a step: after step 6 less than two steps' time is left.
  const CliRun stopped =
      crest_with_clock("", "train " + tiny_cosmoflow_args() +
                               " data.n_epochs=3 train.max_wall_time=2h output_dir=" + run +
                               " --save-weights " + d.file("never.safetensors"));
  ASSERT_EQ(stopped.code, 75) << stopped.out;
  EXPECT_NE(stopped.out.find("time budget: train.max_wall_time 2 h 00 min"), std::string::npos)
      << stopped.out;
  EXPECT_NE(stopped.out.find(
                "stopping at epoch 2, step 3: 3.3 minutes of budget left; checkpoint " + run +
                "/checkpoints/ckpt-000000000007.safetensors; resume with "
                "`crest train --resume " +
                run + "`"),
            std::string::npos)
      << stopped.out;
  EXPECT_NE(stopped.out.find("weights not saved"), std::string::npos) << stopped.out;
  EXPECT_FALSE(std::filesystem::exists(d.file("never.safetensors")));
  const auto st = nlohmann::json::parse(crest::test::read_text(run + "/status.json"));
  EXPECT_EQ(st.at("state"), "preempted") << st.dump();
  EXPECT_EQ(st.at("exit_code"), 75);
  EXPECT_EQ(st.at("epochs_done"), 1);
  EXPECT_EQ(st.at("step_in_epoch"), 3);

  // The next job: no clock hook, so it runs to the end.
  const CliRun resumed =
      run_crest("train --resume " + run + " --save-weights " + d.file("resumed.safetensors"));
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  crest::test::expect_straight_run_gives(d, 3, d.file("resumed.safetensors"));
}

TEST(TimeBudget, SlurmJobEndTimeIsTheBudgetWhenNoneIsGiven) {
  TempDir d;
  const std::string end = std::to_string(std::time(nullptr) + std::time_t{10800});
  const CliRun r = crest_with_clock(
      "SLURM_JOB_END_TIME=" + end,
      "train " + tiny_cosmoflow_args() + " data.n_epochs=5 output_dir=" + d.file("run"));
  EXPECT_EQ(r.code, 75) << r.out;
  EXPECT_NE(r.out.find("time budget: SLURM_JOB_END_TIME ("), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("minutes of budget left"), std::string::npos) << r.out;
  // max_wall_time: none turns it off.
  const CliRun off = crest_with_clock("SLURM_JOB_END_TIME=" + end,
                                      "train " + tiny_cosmoflow_args() +
                                          " data.n_epochs=1 output_dir=" + d.file("off") +
                                          " train.max_wall_time=none");
  EXPECT_EQ(off.code, 0) << off.out;
  EXPECT_EQ(off.out.find("time budget"), std::string::npos) << off.out;
}

TEST(TimeBudget, BadDurationIsRefusedNamingTheKey) {
  const CliRun r =
      run_crest("train " + tiny_cosmoflow_args() + " --dry-run 'train.max_wall_time=2 hours'");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("train.max_wall_time"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("expected a positive duration"), std::string::npos) << r.out;
}

}  // namespace
