// `crest train --resume` stays bit-identical with LAMB, a per-step warmup + multistep schedule
// and gradient accumulation across the epoch's end (3 micro-batches per step, 4 per epoch: the
// epoch-1 checkpoint is taken with a window open, its partial gradient sum in the optimizer
// state); the MLPerf log carries the reference's optimizer and scheduler keys.
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

// The checkpoint tests' small demo (4 steps per epoch, dropout on) with DeepCAM's optimizer.
const std::string kLambSmall =
    crest::test::tiny_cosmoflow_args() +
    " 'optimizer={name: LAMB, weight_decay: 0.01}'"
    " 'lr_schedule={start_lr: 0.002, type: multistep, milestones: [1], decay_rate: 0.5,"
    " lr_warmup_steps: 2}'"
    " train.gradient_accumulation_frequency=3";

TEST(LambResume, ResumeWithAnOpenAccumulationWindowIsBitIdentical) {
  TempDir d;
  CliRun straight =
      run_crest("train " + kLambSmall + " data.n_epochs=2 output_dir=" + d.file("straight") +
                " --save-weights " + d.file("straight.safetensors"));
  ASSERT_EQ(straight.code, 0) << straight.out;
  CliRun first =
      run_crest("train " + kLambSmall + " data.n_epochs=1 output_dir=" + d.file("split"));
  ASSERT_EQ(first.code, 0) << first.out;
  const auto ckpts = crest::list_checkpoints(d.file("split/checkpoints"));
  ASSERT_EQ(ckpts.size(), 1u);
  // 4 micro-batches: one update (after 3), one micro-batch summed and waiting.
  const crest::CheckpointInfo info = crest::read_checkpoint_info(ckpts[0]);
  EXPECT_EQ(info.position.global_step, 4);
  EXPECT_EQ(info.position.optimizer_steps, 1);
  EXPECT_EQ(info.optimizer, "lamb");
  bool has_sum = false, has_moments = false;
  for (const auto& name : crest::SafetensorsFile(ckpts[0]).names()) {
    has_sum |= name.rfind("optimizer/gradient_sum/", 0) == 0;
    has_moments |= name.rfind("optimizer/v/", 0) == 0;
  }
  EXPECT_TRUE(has_sum);
  EXPECT_TRUE(has_moments);

  CliRun resumed = run_crest("train --resume " + d.file("split") +
                             " data.n_epochs=2 --save-weights " + d.file("split.safetensors"));
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  expect_same_tensors(d.file("straight.safetensors"), d.file("split.safetensors"));
  expect_same_tensors(crest::list_checkpoints(d.file("straight/checkpoints")).back(),
                      crest::list_checkpoints(d.file("split/checkpoints")).back());

  const std::string mllog = crest::test::slurp(d.file("straight/mllog.txt"));
  for (const char* key :
       {"\"opt_name\", \"value\": \"LAMB\"", "\"opt_lr\", \"value\": 0.002",
        "\"opt_bias_correction\", \"value\": true", "\"opt_betas\", \"value\": [0.9, 0.999]",
        "\"opt_eps\", \"value\": 1e-06", "\"opt_weight_decay\", \"value\": 0.01",
        "\"opt_grad_averaging\", \"value\": true", "\"opt_max_grad_norm\", \"value\": 1.0",
        "\"scheduler_type\", \"value\": \"multistep\"", "\"scheduler_milestones\", \"value\": [1]",
        "\"scheduler_decay_rate\", \"value\": 0.5", "\"scheduler_lr_warmup_steps\", \"value\": 2",
        "\"scheduler_lr_warmup_factor\", \"value\": 1.0",
        "\"gradient_accumulation_steps\", \"value\": 3"})
    EXPECT_NE(mllog.find(key), std::string::npos) << key << "\n" << mllog;
  EXPECT_EQ(mllog.find("opt_base_learning_rate"), std::string::npos) << mllog;
}

}  // namespace
