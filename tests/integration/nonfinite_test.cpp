// Non-finite values (train.on_nonfinite, docs/checkpoints.md): a NaN is injected into the input
// batch of global step 6 (test hook CREST_TEST_NONFINITE_AT_STEP, a transient fault like one
// corrupt sample). stop: the run ends naming the step, the first tensor with a non-finite
// gradient and the last good checkpoint, which is kept; skip: the update is left out and the run
// goes on; rollback: the run goes back to the last checkpoint with another data order.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "crest/data/safetensors.hpp"
#include "crest/train/checkpoint.hpp"
#include "support/cli_util.hpp"
#include "support/tiny_run.hpp"

namespace {

using crest::test::CliRun;
using crest::test::run_shell;
using crest::test::TempDir;
using crest::test::tiny_cosmoflow_args;

CliRun run_with_nan(const std::string& at, const std::string& policy, const std::string& run,
                    const std::string& more = "") {
  return run_shell("CREST_TEST_NONFINITE_AT_STEP=" + at + " " + CREST_BINARY + " train " +
                   tiny_cosmoflow_args() + " data.n_epochs=3 train.on_nonfinite=" + policy +
                   " output_dir=" + run + " " + more + " 2>&1");
}

bool all_finite(const std::string& weights) {
  const crest::SafetensorsFile f(weights);
  for (const auto& t : f.tensors()) {
    const auto* x = reinterpret_cast<const float*>(t.data);
    for (int64_t i = 0; i < t.numel(); ++i)
      if (!std::isfinite(x[i])) return false;
  }
  return true;
}

TEST(NonFinite, StopNamesTheStepTheTensorAndTheKeptCheckpoint) {
  TempDir d;
  const std::string run = d.file("run");
  const CliRun r = run_with_nan("6", "stop", run);
  EXPECT_EQ(r.code, 1) << r.out;
  const std::string kept = run + "/checkpoints/ckpt-000000000004.safetensors";
  EXPECT_NE(r.out.find("crest: error: epoch 2: non-finite values at step 2 of epoch 2 (global "
                       "step 6): first non-finite gradient: conv1.weight"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("The last good checkpoint is " + kept + " (kept)"), std::string::npos)
      << r.out;
  // Nothing after it was written, and it is intact.
  EXPECT_EQ(crest::list_checkpoints(run + "/checkpoints"), std::vector<std::string>{kept});
  EXPECT_NO_THROW((void)crest::read_checkpoint_info(kept));
  const auto st = nlohmann::json::parse(crest::test::read_text(run + "/status.json"));
  EXPECT_EQ(st.at("state"), "failed") << st.dump();
  EXPECT_EQ(st.at("resumable"), true);
  EXPECT_EQ(st.at("checkpoint"), kept);
}

TEST(NonFinite, SkipLeavesTheUpdateOutAndGoesOn) {
  TempDir d;
  const CliRun r =
      run_with_nan("6", "skip", d.file("run"), "--save-weights " + d.file("w.safetensors"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("(global step 6): first non-finite gradient: conv1.weight"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("update skipped (1 so far; train.on_nonfinite: skip)"), std::string::npos)
      << r.out;
  EXPECT_TRUE(all_finite(d.file("w.safetensors")));
}

// In bf16 the data input is 16-bit (CompileOptions::half_inputs): the NaN is written as a bf16
// code and caught the same way.
TEST(NonFinite, SkipCatchesTheNanInA16BitInput) {
  TempDir d;
  const CliRun r = run_with_nan(
      "6", "skip", d.file("run"),
      "--precision bf16 crest.backend=reference --save-weights " + d.file("w.safetensors"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("(global step 6): "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("first non-finite gradient: conv1.weight"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("update skipped (1 so far; train.on_nonfinite: skip)"), std::string::npos)
      << r.out;
  EXPECT_TRUE(all_finite(d.file("w.safetensors")));
}

TEST(NonFinite, RollbackGoesBackToTheCheckpointWithAnotherOrder) {
  TempDir d;
  const std::string run = d.file("run");
  const CliRun r = run_with_nan("6", "rollback", run, "--save-weights " + d.file("w.safetensors"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("rolling back to " + run + "/checkpoints/ckpt-000000000004.safetensors"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("rolled back to epoch 2, step 0 (rollback 1 of at most 3)"),
            std::string::npos)
      << r.out;
  EXPECT_TRUE(all_finite(d.file("w.safetensors")));
  // Later checkpoints carry the count, so a resume keeps the changed order.
  const auto last = crest::list_checkpoints(run + "/checkpoints").back();
  EXPECT_EQ(crest::read_checkpoint_info(last).position.rollbacks, 1);
}

TEST(NonFinite, RollbackStopsWhenItsLimitIsReached) {
  TempDir d;
  const CliRun r = run_with_nan("6", "rollback", d.file("run"), "train.max_rollbacks=0");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("train.max_rollbacks (0) rollbacks done"), std::string::npos) << r.out;
}

// Two ranks, the NaN on rank 1 only: its flag and its gradients reach rank 0 in the step's
// allreduce, both ranks stop at the same step with the same message, no rank hangs.
TEST(NonFinite, ANanOnOneRankStopsEveryRank) {
  TempDir d;
  const CliRun r = crest::test::run_mpirun(
      "-np 2 -x CREST_TEST_NONFINITE_AT_STEP=3@1 " + std::string(CREST_BINARY) + " train " +
          tiny_cosmoflow_args() + " crest.threads=1 data.n_epochs=2 output_dir=" + d.file("run"),
      300);
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("(global step 3): first non-finite gradient:"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("has not completed after"), std::string::npos) << "a rank hung:\n" << r.out;
}

}  // namespace
