// Dynamic loss scaling through `crest train` (train.loss_scaling: dynamic) on the tiny CosmoFlow
// run (4 steps an epoch, dropout on): an overflow injected into one step's gradients (test hook
// CREST_TEST_GRAD_OVERFLOW_AT_STEP) skips exactly that update and halves the scale, clean steps
// grow it again, and the records say so; a float32 run with a power-of-two scale and no overflow
// equals the run without loss scaling bit for bit; a resumed run reproduces the scale and the
// weights; skipped steps still advance the learning-rate schedule (torch's choice); a non-finite
// loss stays train.on_nonfinite's; bad settings exit 2 naming the key.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "crest/train/checkpoint.hpp"
#include "support/cli_util.hpp"
#include "support/tiny_run.hpp"
#include "support/weights_compare.hpp"

namespace {

using crest::test::CliRun;
using crest::test::expect_same_tensors;
using crest::test::read_text;
using crest::test::run_shell;
using crest::test::TempDir;
using crest::test::tiny_cosmoflow_args;

// The tiny run with `env` before it and `more` after its arguments; stdout and stderr together.
CliRun tiny(const std::string& env, const std::string& more) {
  return run_shell(env + " " + CREST_BINARY + " train " + tiny_cosmoflow_args() + " " + more +
                   " 2>&1");
}

std::string checkpoint(const std::string& run, int step) {
  char name[64];
  std::snprintf(name, sizeof name, "/checkpoints/ckpt-%012d.safetensors", step);
  return run + name;
}

// Growth every 3 clean steps: 65536 -> 131072 after step 3; the overflow at step 6 (2 clean steps
// after the growth) halves it to 65536; steps 7-9 grow it to 131072, steps 10-12 to 262144.
TEST(LossScalingRun, AnOverflowSkipsThatStepHalvesTheScaleAndCleanStepsGrowIt) {
  TempDir d;
  const std::string run = d.file("run");
  const CliRun r = tiny("CREST_TEST_GRAD_OVERFLOW_AT_STEP=6",
                        "data.n_epochs=3 train.loss_scaling=dynamic "
                        "train.loss_scale_growth_interval=3 'train.checkpoint_every=\"1 steps\"' "
                        "train.checkpoint_keep=100 output_dir=" +
                            run);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("global step 6: gradient overflow at loss scale 131072; update skipped, "
                       "loss scale now 65536\n"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("gradient overflow", r.out.find("global step 6:") + 20), std::string::npos)
      << "one overflow only:\n"
      << r.out;
  EXPECT_NE(r.out.find("loss_scale 131072  "), std::string::npos) << r.out;  // epoch 1
  EXPECT_NE(r.out.find("loss_scale 65536 (1 step skipped: overflow)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("loss_scale 262144  "), std::string::npos) << r.out;  // epoch 3

  // The skipped step changed nothing but the scale: weights and optimizer state bit for bit.
  expect_same_tensors(checkpoint(run, 5), checkpoint(run, 6));
  const crest::CheckpointInfo five = crest::read_checkpoint_info(checkpoint(run, 5));
  const crest::CheckpointInfo six = crest::read_checkpoint_info(checkpoint(run, 6));
  EXPECT_EQ(six.position.optimizer_steps, five.position.optimizer_steps);
  EXPECT_EQ(five.position.loss_scaler.scale, 131072);
  EXPECT_EQ(six.position.loss_scaler.scale, 65536);
  EXPECT_EQ(six.position.loss_scaler.clean_steps, 0);
  EXPECT_EQ(five.position.overflow_steps, 0);
  EXPECT_EQ(six.position.overflow_steps, 1);
  const crest::CheckpointInfo seven = crest::read_checkpoint_info(checkpoint(run, 7));
  EXPECT_EQ(seven.position.optimizer_steps, six.position.optimizer_steps + 1);

  const auto st = nlohmann::json::parse(read_text(run + "/status.json"));
  EXPECT_EQ(st.at("loss_scale"), 262144.0) << st.dump();
  EXPECT_EQ(st.at("overflow_steps"), 1) << st.dump();
  // TensorBoard has both scalars (tags are stored as plain text in the event records).
  std::string events;
  for (const auto& f : std::filesystem::directory_iterator(run + "/tensorboard"))
    events += read_text(f.path().string());
  EXPECT_NE(events.find("train/loss_scale"), std::string::npos);
  EXPECT_NE(events.find("train/skipped_steps"), std::string::npos);
}

// Powers of two scale exactly, so S·dL carried through backward and 1/S taken out again change
// no bit of a float32 run (here the scale doubles every 2 steps, up to 2^22).
TEST(LossScalingRun, APowerOfTwoScaleWithoutOverflowGivesTheUnscaledRunsWeights) {
  TempDir d;
  const CliRun plain =
      tiny("", "data.n_epochs=3 output_dir=" + d.file("a") + " --save-weights " + d.file("a.st"));
  ASSERT_EQ(plain.code, 0) << plain.out;
  const CliRun scaled = tiny("",
                             "data.n_epochs=3 train.loss_scaling=dynamic "
                             "train.loss_scale_growth_interval=2 output_dir=" +
                                 d.file("b") + " --save-weights " + d.file("b.st"));
  ASSERT_EQ(scaled.code, 0) << scaled.out;
  EXPECT_NE(scaled.out.find("loss_scale 4194304"), std::string::npos) << scaled.out;
  EXPECT_EQ(scaled.out.find("overflow"), std::string::npos) << scaled.out;
  expect_same_tensors(d.file("a.st"), d.file("b.st"));
}

// Stopped after epoch 2 (the overflow at step 6 behind it, two clean steps towards the next
// growth) and resumed: the scale, its count of clean steps and the overflow count come back, so
// the scale grows at step 9 as in the straight run, and the weights end the same.
TEST(LossScalingRun, AResumedRunReproducesTheScaleAndTheWeights) {
  TempDir d;
  const std::string args =
      "train.loss_scaling=dynamic train.loss_scale_growth_interval=3 data.n_epochs=";
  const std::string fault = "CREST_TEST_GRAD_OVERFLOW_AT_STEP=6";
  const CliRun straight = tiny(fault, args + "3 output_dir=" + d.file("straight") +
                                          " --save-weights " + d.file("straight.st"));
  ASSERT_EQ(straight.code, 0) << straight.out;
  const CliRun first = tiny(fault, args + "2 output_dir=" + d.file("split"));
  ASSERT_EQ(first.code, 0) << first.out;
  const CliRun resumed =
      run_shell(std::string(CREST_BINARY) + " train --resume " + d.file("split") +
                " data.n_epochs=3 --save-weights " + d.file("split.st") + " 2>&1");
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  expect_same_tensors(d.file("straight.st"), d.file("split.st"));
  const auto a = crest::read_checkpoint_info(checkpoint(d.file("straight"), 12)).position;
  const auto b = crest::read_checkpoint_info(checkpoint(d.file("split"), 12)).position;
  EXPECT_EQ(a.loss_scaler.scale, 262144);
  EXPECT_EQ(b.loss_scaler.scale, a.loss_scaler.scale);
  EXPECT_EQ(b.loss_scaler.clean_steps, a.loss_scaler.clean_steps);
  EXPECT_EQ(b.overflow_steps, 1);
  EXPECT_EQ(b.optimizer_steps, a.optimizer_steps);
}

// A per-step multistep schedule whose milestone 4 decays the rate from optimizer step index 3 on
// (the epoch's last step; epoch lines print its rate). With step 2 skipped for an overflow, the
// last step is the third update but the fourth schedule step: torch's GradScaler skips
// optimizer.step() while the loop still calls scheduler.step(). A step train.on_nonfinite: skip
// leaves out does not count (index 2: not yet decayed).
TEST(LossScalingRun, OverflowStepsAdvanceTheLearningRateScheduleAsInTorch) {
  TempDir d;
  const std::string schedule =
      "data.n_epochs=1 'lr_schedule={start_lr: 0.01, type: multistep, milestones: [4], "
      "decay_rate: 0.1}' ";
  const std::string fault = "CREST_TEST_GRAD_OVERFLOW_AT_STEP=2";
  const CliRun scaled =
      tiny(fault, schedule + "train.loss_scaling=dynamic output_dir=" + d.file("scaled"));
  ASSERT_EQ(scaled.code, 0) << scaled.out;
  EXPECT_NE(scaled.out.find("gradient overflow"), std::string::npos) << scaled.out;
  EXPECT_NE(scaled.out.find("  lr 0.00100  "), std::string::npos) << scaled.out;
  const CliRun skipped =
      tiny(fault, schedule + "train.on_nonfinite=skip output_dir=" + d.file("skipped"));
  ASSERT_EQ(skipped.code, 0) << skipped.out;
  EXPECT_NE(skipped.out.find("update skipped (1 so far; train.on_nonfinite: skip)"),
            std::string::npos)
      << skipped.out;
  EXPECT_NE(skipped.out.find("  lr 0.01000  "), std::string::npos) << skipped.out;
}

// A small graph whose forward pass carries a NaN input on to the loss (tanh and average pooling;
// CosmoFlow's max pooling can drop it, leaving the loss finite and only the gradients NaN, which
// under loss scaling is an overflow, as for torch's GradScaler).
const char* kNanCarryingGraph = R"(
data: {name: dummy, n_train: 8, n_valid: 4, sample_shape: [16, 16, 16, 4], batch_size: 4,
       n_epochs: 2, seed: 1}
model:
  name: graph
  inputs:
    - {name: x, shape: [4, 16, 16, 16], layout: channels_last}
    - {name: y, shape: [4]}
  layers:
    - {name: conv, kind: conv, out_channels: 4, kernel: [3, 3, 3], same: true}
    - {name: act, kind: tanh}
    - {name: pool, kind: avg_pool, kernel: [4, 4, 4]}
    - {name: flatten, kind: flatten}
    - {name: fc, kind: dense, out_features: 4}
    - {name: out, kind: tanh}
    - {name: loss, kind: mse_loss, inputs: [out, y]}
  outputs: [out]
  loss: loss
optimizer: {name: SGD, momentum: 0.9}
train: {loss_scaling: dynamic}
crest: {threads: 2}
)";

// The forward pass never sees the scale: a NaN loss is a non-finite step for train.on_nonfinite
// (stop by default), not an overflow.
TEST(LossScalingRun, ANonFiniteLossStillStopsTheRun) {
  TempDir d;
  std::ofstream(d.file("graph.yaml")) << kNanCarryingGraph;
  const CliRun r =
      run_shell("CREST_TEST_NONFINITE_AT_STEP=3 " + std::string(CREST_BINARY) + " train --config " +
                d.file("graph.yaml") + " output_dir=" + d.file("run") + " 2>&1");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("(global step 3): the loss was not finite on at least one rank"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("gradient overflow"), std::string::npos) << r.out;
}

TEST(LossScalingRun, BadSettingsExitTwoNamingTheKey) {
  for (const auto& [setting, key] : std::vector<std::pair<std::string, std::string>>{
           {"train.loss_scaling=static", "train.loss_scaling"},
           {"train.loss_scale_backoff_factor=2", "train.loss_scale_backoff_factor"},
           {"train.loss_scale_initial=0.5", "train.loss_scale_initial"}}) {
    TempDir d;
    const CliRun r = tiny("", setting + " output_dir=" + d.file("run"));
    EXPECT_EQ(r.code, 2) << setting << "\n" << r.out;
    EXPECT_NE(r.out.find(key), std::string::npos) << r.out;
  }
}

}  // namespace
