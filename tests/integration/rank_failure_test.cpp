// A failure on one rank only (src/train/rank_failure.hpp): a batch that rank cannot read, in
// training or in validation, ends every rank at that step with the failing rank's error, naming
// it, instead of leaving the others waiting in the next collective for the watchdog. The faults
// come from the test hooks CREST_TEST_BATCH_FAILURE_AT_STEP and
// CREST_TEST_VALIDATION_FAILURE_AT_EPOCH (src/train/test_faults.hpp); the watchdog's deadline is
// set far past the test's own limit, so a hang fails the test instead of being ended by it.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "crest/train/checkpoint.hpp"
#include "support/cli_util.hpp"
#include "support/tiny_run.hpp"

namespace {

using crest::test::CliRun;
using crest::test::TempDir;
using crest::test::tiny_cosmoflow_args;

// 2 ranks, 2 steps per epoch, a checkpoint after each epoch.
CliRun train_on_two_ranks(const std::string& fault, const std::string& run) {
  return crest::test::run_mpirun("-np 2 -x " + fault + " " + std::string(CREST_BINARY) + " train " +
                                     tiny_cosmoflow_args() +
                                     " crest.threads=1 data.n_epochs=3 dist.timeout_s=3600"
                                     " output_dir=" +
                                     run,
                                 300);
}

TEST(RankFailure, ATrainingBatchUnreadableOnOneRankEndsEveryRankAtThatStep) {
  TempDir d;
  const CliRun r = train_on_two_ranks("CREST_TEST_BATCH_FAILURE_AT_STEP=3@1", d.file("run"));
  EXPECT_EQ(r.code, 2) << r.out;  // an input error, as the damaged file would give
  EXPECT_NE(r.out.find("epoch 2: step 1: rank 1 of 2: test fault: the batch of global step 3 "
                       "could not be read"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("has not completed after"), std::string::npos) << "a rank hung:\n" << r.out;
  // Epoch 1's checkpoint is intact: the failed step changed nothing.
  const auto kept = crest::list_checkpoints(d.file("run") + "/checkpoints");
  ASSERT_EQ(kept.size(), 1u) << r.out;
  EXPECT_EQ(crest::read_checkpoint_info(kept.back()).position.epoch, 1);
}

TEST(RankFailure, AValidationBatchUnreadableOnOneRankEndsEveryRank) {
  TempDir d;
  const CliRun r = train_on_two_ranks("CREST_TEST_VALIDATION_FAILURE_AT_EPOCH=2@1", d.file("run"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("the validation of epoch 2: rank 1 of 2: test fault: a validation batch "
                       "could not be read"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("has not completed after"), std::string::npos) << "a rank hung:\n" << r.out;
}

}  // namespace
