// `crest train --resume` stays bit-identical with LARS (its momentum buffer, a per-epoch schedule
// with warmup) and with LARC over Adam (the base's moments under their own names, gradient
// accumulation across the epoch's end: the epoch-1 checkpoint holds the open window's partial
// sum). A checkpoint of LARC over Adam does not resume with another base, and an exclusion
// pattern that matches no parameter stops the run before it starts, naming the key.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "crest/data/safetensors.hpp"
#include "crest/train/checkpoint.hpp"
#include "support/cli_util.hpp"
#include "support/test_util.hpp"
#include "support/tiny_run.hpp"
#include "support/weights_compare.hpp"

namespace {

using crest::test::CliRun;
using crest::test::expect_same_tensors;
using crest::test::run_crest;
using crest::test::TempDir;

// The checkpoint tests' small demo (4 steps per epoch, dropout on).
const std::string kSmall = crest::test::tiny_cosmoflow_args();

const std::string kLars = kSmall +
                          " 'optimizer={name: LARS, momentum: 0.9, weight_decay: 5.0e-4,"
                          " trust_coefficient: 0.02, lars_exclude: [\"*.bias\"]}'"
                          " 'lr_schedule={base_lr: 0.1, n_warmup_epochs: 1, scaling: linear,"
                          " base_batch_size: 2, decay_schedule: {1: 0.5}}'";

const std::string kLarcAdam = kSmall +
                              " 'optimizer={name: LARC, larc_base: Adam, larc_mode: clip,"
                              " weight_decay: 0.01}'"
                              " 'lr_schedule={start_lr: 0.002, type: multistep, milestones: [1],"
                              " decay_rate: 0.5, lr_warmup_steps: 2}'"
                              " train.gradient_accumulation_frequency=3";

bool has_tensor_under(const std::string& checkpoint, const std::string& prefix) {
  for (const auto& name : crest::SafetensorsFile(checkpoint).names())
    if (name.rfind(prefix, 0) == 0) return true;
  return false;
}

// Two epochs straight, and one epoch then --resume for the second: the same bits.
void expect_resume_is_bit_identical(const TempDir& d, const std::string& args) {
  CliRun straight =
      run_crest("train " + args + " data.n_epochs=2 output_dir=" + d.file("straight") +
                " --save-weights " + d.file("straight.safetensors"));
  ASSERT_EQ(straight.code, 0) << straight.out;
  CliRun first = run_crest("train " + args + " data.n_epochs=1 output_dir=" + d.file("split"));
  ASSERT_EQ(first.code, 0) << first.out;
  CliRun resumed = run_crest("train --resume " + d.file("split") +
                             " data.n_epochs=2 --save-weights " + d.file("split.safetensors"));
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  expect_same_tensors(d.file("straight.safetensors"), d.file("split.safetensors"));
  expect_same_tensors(crest::list_checkpoints(d.file("straight/checkpoints")).back(),
                      crest::list_checkpoints(d.file("split/checkpoints")).back());
}

TEST(LarsResume, LarsResumeIsBitIdentical) {
  TempDir d;
  expect_resume_is_bit_identical(d, kLars);
  const auto ckpts = crest::list_checkpoints(d.file("split/checkpoints"));
  ASSERT_FALSE(ckpts.empty());
  const crest::CheckpointInfo info = crest::read_checkpoint_info(ckpts[0]);
  EXPECT_EQ(info.optimizer, "lars");
  EXPECT_TRUE(has_tensor_under(ckpts[0], "optimizer/momentum_buffer/conv1.weight"));
  EXPECT_TRUE(has_tensor_under(ckpts[0], "optimizer/momentum_buffer/conv1.bias"));
}

TEST(LarsResume, LarcOverAdamWithAnOpenAccumulationWindowIsBitIdentical) {
  TempDir d;
  expect_resume_is_bit_identical(d, kLarcAdam);
  const auto ckpts = crest::list_checkpoints(d.file("split/checkpoints"));
  ASSERT_FALSE(ckpts.empty());
  // 4 micro-batches: one update (after 3), one micro-batch summed and waiting.
  const crest::CheckpointInfo info = crest::read_checkpoint_info(ckpts[0]);
  EXPECT_EQ(info.position.global_step, 4);
  EXPECT_EQ(info.position.optimizer_steps, 1);
  EXPECT_EQ(info.optimizer, "larc(adam)");
  EXPECT_TRUE(has_tensor_under(ckpts[0], "optimizer/m/"));
  EXPECT_TRUE(has_tensor_under(ckpts[0], "optimizer/v/"));
  EXPECT_TRUE(has_tensor_under(ckpts[0], "optimizer/gradient_sum/"));

  // The base's state cannot change meaning under a resumed run.
  CliRun other = run_crest("train --resume " + d.file("split") +
                           " data.n_epochs=3 'optimizer={name: LARC, larc_base: SGD}'");
  EXPECT_EQ(other.code, 2) << other.out;
  EXPECT_NE(other.out.find("larc(adam)"), std::string::npos) << other.out;
  EXPECT_NE(other.out.find("larc(sgd)"), std::string::npos) << other.out;
}

TEST(LarsResume, UnmatchedExclusionPatternStopsTheRunNamingTheKey) {
  TempDir d;
  CliRun r = run_crest("train " + kSmall + " output_dir=" + d.file("run") +
                       " 'optimizer={name: LARS, lars_exclude: [\"*.bias\", \"*.bn.weight\"]}'");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("optimizer.lars_exclude: pattern '*.bn.weight' matches no trainable"),
            std::string::npos)
      << r.out;
  EXPECT_TRUE(crest::list_checkpoints(d.file("run/checkpoints")).empty());
}

}  // namespace
