// The registered DeepCAM network trained end to end through `crest train` at a reduced size on
// learnable synthetic data: validation IoU rises clearly and the target stop fires; the MLPerf
// log carries DeepCAM's keys; a checkpoint resumes bit-exactly.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>

#include "crest/data/safetensors.hpp"
#include "support/cli_util.hpp"
#include "support/test_util.hpp"

namespace crest {
namespace {

using test::run_crest;
using test::TempDir;

// 32 x 48 (the smallest size whose decoder still sees a 2 x 3 encoder output), 32 training
// samples in 8 batches of 4: about 5 s an epoch on 2 cores.
std::string deepcam_run_config(const TempDir& t) {
  const auto data = run_crest("datagen deepcam --out " + t.file("data") +
                              " --train 32 --valid 8 --height 32 --width 48 --seed 0");
  EXPECT_EQ(data.code, 0) << data.out;
  std::string path = t.file("deepcam.yaml");
  std::ofstream(path) << "output_dir: " << t.file("run")
                      << "\ndata: {name: deepcam, data_dir: " << t.file("data")
                      << R"(, sample_shape: [32, 48, 16], batch_size: 4,
       n_epochs: 8, seed: 333}
model: {name: deepcam}
optimizer: {name: LAMB, weight_decay: 0.01}
lr_schedule: {start_lr: 0.004, type: multistep, milestones: [1000], decay_rate: 0.1,
              lr_warmup_steps: 4}
train: {metrics: [iou], checkpoint_every: 1}
mlperf: {org: crest}
crest: {threads: 2}
)";
  return path;
}

// The val_iou of every epoch line ("epoch 2/8  loss ... val_iou 0.6119 ...").
std::vector<double> val_ious(const std::string& out) {
  std::vector<double> v;
  std::istringstream in(out);
  const std::regex re("^epoch [0-9]+/[0-9]+  .*val_iou ([0-9.]+)");
  std::smatch m;
  for (std::string line; std::getline(in, line);)
    if (std::regex_search(line, m, re)) v.push_back(std::stod(m[1]));
  return v;
}

TEST(DeepcamTrain, IouRisesAndTheTargetStopFires) {
  TempDir t;
  const std::string cfg = deepcam_run_config(t);
  // Measured with the small-size rules of docs/synthetic-data.md, epochs 1-8: 0.30, 0.52, 0.52,
  // 0.37, 0.59, 0.39, 0.61, 0.67 (LAMB in float32 arithmetic, as apex); with LAMB in double it
  // was 0.30, 0.52, 0.52, 0.47, then 0.65 before epoch 8. On 8 validation samples the curve
  // swings by 0.1-0.2 from epoch to epoch, and any change of rounding moves the swings, so the
  // target sits where the rise is clear in both: 0.55, first reached at epoch 5 here. (The
  // learnable set of tests/fixtures/learnable_deepcam.yaml, 96 training samples, reaches 0.82
  // at epoch 3.)
  const auto r = run_crest("train --config " + cfg + " train.target_iou=0.55");
  ASSERT_EQ(r.code, 0) << r.out;
  const std::vector<double> iou = val_ious(r.out);
  ASSERT_GE(iou.size(), 2u) << r.out;
  EXPECT_LT(iou.front(), 0.5) << r.out;
  EXPECT_GE(iou.back(), 0.55) << r.out;
  EXPECT_LT(iou.size(), 8u) << "the target stop did not fire: " << r.out;
  EXPECT_NE(r.out.find("status success"), std::string::npos) << r.out;

  // The MLPerf log: DeepCAM's benchmark name and keys.
  const std::string log = test::slurp(t.file("run/mllog.txt"));
  for (const char* key :
       {"\"submission_benchmark\", \"value\": \"deepcam\"", "\"key\": \"batchnorm_group_size\"",
        "\"key\": \"gradient_accumulation_frequency\"",
        "\"key\": \"opt_name\", \"value\": \"LAMB\"",
        "\"key\": \"scheduler_type\", \"value\": \"multistep\"",
        "\"key\": \"target_accuracy_reached\"", "\"key\": \"eval_loss\"",
        "\"key\": \"train_accuracy\"", "\"key\": \"train_loss\""})
    EXPECT_NE(log.find(key), std::string::npos) << key << "\n" << log;
  // One eval_accuracy and one train_accuracy (the last micro-batch's IoU) per epoch.
  for (const char* key : {"\"eval_accuracy\"", "\"train_accuracy\""}) {
    size_t count = 0;
    for (size_t at = log.find(key); at != std::string::npos; at = log.find(key, at + 1)) ++count;
    EXPECT_EQ(count, iou.size()) << key;
  }
}

// Batch-norm running statistics and counters, LAMB's state and the per-step schedule all travel
// in the checkpoint: 1 epoch + a resumed 1 epoch equal 2 epochs, bit for bit. On the reduced
// network (model.width_divisor: 8): every layer and state tensor of DeepCAM with 1/64 of the
// parameters.
TEST(DeepcamTrain, ResumesBitExactly) {
  TempDir t;
  const std::string cfg = deepcam_run_config(t);
  const std::string args =
      "train --config " + cfg + " data.n_train=8 data.n_valid=4 model.width_divisor=8 ";
  const auto straight = run_crest(args + "data.n_epochs=2 output_dir=" + t.file("straight") +
                                  " --save-weights " + t.file("straight.safetensors"));
  ASSERT_EQ(straight.code, 0) << straight.out;
  const auto first = run_crest(args + "data.n_epochs=1 output_dir=" + t.file("split"));
  ASSERT_EQ(first.code, 0) << first.out;
  const auto resumed = run_crest("train --resume " + t.file("split") +
                                 " data.n_epochs=2 --save-weights " + t.file("split.safetensors"));
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  const SafetensorsFile a(t.file("straight.safetensors")), b(t.file("split.safetensors"));
  ASSERT_EQ(a.names(), b.names());
  ASSERT_EQ(a.tensors().size(), 529u);
  for (const auto& x : a.tensors()) {
    const SafetensorsTensor& y = b.at(x.name);
    ASSERT_EQ(x.bytes, y.bytes) << x.name;
    EXPECT_EQ(std::memcmp(x.data, y.data, x.bytes), 0) << x.name;
  }
}

// data.train_order: reference is a function of (files, epoch) alone, so a run killed mid-epoch
// resumes at the saved step of the same order: 2 epochs straight equal 2 epochs with a resume
// from step 2 of 3 of the first, bit for bit (on the reduced network, as above).
TEST(DeepcamTrain, TheReferenceOrderResumesMidEpochBitExactly) {
  TempDir t;
  const std::string cfg = deepcam_run_config(t);
  const std::string args = "train --config " + cfg +
                           " data.n_train=6 data.n_valid=1 data.batch_size=2 data.n_epochs=2 "
                           "data.train_order=reference model.width_divisor=8 ";
  const auto straight = run_crest(args + "output_dir=" + t.file("straight") + " --save-weights " +
                                  t.file("straight.safetensors"));
  ASSERT_EQ(straight.code, 0) << straight.out;
  // Checkpoints every 2 steps: step 2 (mid-epoch 1) is written, the process dies writing step 4's.
  const auto killed = test::run_shell(
      "CREST_TEST_KILL_DURING_CHECKPOINT=2 " + std::string(CREST_BINARY) + " " + args +
      "'train.checkpoint_every=2 steps' output_dir=" + t.file("split") + " 2>&1");
  ASSERT_NE(killed.code, 0) << killed.out;
  const auto resumed = run_crest("train --resume " + t.file("split") + " --save-weights " +
                                 t.file("split.safetensors"));
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  EXPECT_NE(resumed.out.find("epoch 1, step 2"), std::string::npos) << resumed.out;
  const SafetensorsFile a(t.file("straight.safetensors")), b(t.file("split.safetensors"));
  ASSERT_EQ(a.names(), b.names());
  for (const auto& x : a.tensors()) {
    const SafetensorsTensor& y = b.at(x.name);
    ASSERT_EQ(x.bytes, y.bytes) << x.name;
    EXPECT_EQ(std::memcmp(x.data, y.data, x.bytes), 0) << x.name;
  }
}

}  // namespace
}  // namespace crest
