// crest train reading the next step's batch ahead (src/train/batch_ahead.hpp), the path a GPU run
// takes so that the batch's copy overlaps the step before it, forced on host memory with the test
// hook CREST_TEST_READ_AHEAD=1: the same bits as without it, through a stop in the middle of an
// epoch (the batch read ahead goes back unused) and the resume, and a rank's unreadable batch
// still ends every rank at its own step.
#include <gtest/gtest.h>

#include <string>

#include "crest/train/checkpoint.hpp"
#include "support/cli_util.hpp"
#include "support/tiny_run.hpp"

namespace {

using crest::test::CliRun;
using crest::test::run_shell;
using crest::test::TempDir;
using crest::test::tiny_cosmoflow_args;

CliRun crest_reading_ahead(const std::string& env, const std::string& args) {
  return run_shell("CREST_TEST_READ_AHEAD=1 " + env + " " + CREST_BINARY + " " + args + " 2>&1");
}

// The time budget's clock hook (1000 s a step against 2 h) stops the run at epoch 2, step 3.
TEST(ReadAhead, AStopMidEpochAndItsResumeEndAsAStraightRunWithout) {
  TempDir d;
  const std::string run = d.file("run");
  const CliRun stopped =
      crest_reading_ahead("CREST_TEST_SECONDS_PER_STEP=1000",
                          "train " + tiny_cosmoflow_args() +
                              " data.n_epochs=3 train.max_wall_time=2h output_dir=" + run);
  ASSERT_EQ(stopped.code, 75) << stopped.out;
  EXPECT_NE(stopped.out.find("stopping at epoch 2, step 3"), std::string::npos) << stopped.out;
  const CliRun resumed = crest_reading_ahead(
      "", "train --resume " + run + " --save-weights " + d.file("resumed.safetensors"));
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  crest::test::expect_straight_run_gives(d, 3, d.file("resumed.safetensors"));
}

TEST(ReadAhead, TheHookTakesZeroOrOne) {
  TempDir d;
  const CliRun r = run_shell("CREST_TEST_READ_AHEAD=yes " + std::string(CREST_BINARY) + " train " +
                             tiny_cosmoflow_args() + " output_dir=" + d.file("run") + " 2>&1");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("CREST_TEST_READ_AHEAD must be 0 or 1, got 'yes'"), std::string::npos)
      << r.out;
}

TEST(ReadAhead, ABatchUnreadableOnOneRankEndsEveryRankAtItsStep) {
  TempDir d;
  const CliRun r = crest::test::run_mpirun(
      "-np 2 -x CREST_TEST_READ_AHEAD=1 -x CREST_TEST_BATCH_FAILURE_AT_STEP=3@1 " +
          std::string(CREST_BINARY) + " train " + tiny_cosmoflow_args() +
          " crest.threads=1 data.n_epochs=3 dist.timeout_s=3600 output_dir=" + d.file("run"),
      300);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("epoch 2: step 1: rank 1 of 2: test fault: the batch of global step 3 "
                       "could not be read"),
            std::string::npos)
      << r.out;
  const auto kept = crest::list_checkpoints(d.file("run") + "/checkpoints");
  ASSERT_EQ(kept.size(), 1u) << r.out;
  EXPECT_EQ(crest::read_checkpoint_info(kept.back()).position.epoch, 1);
}

}  // namespace
