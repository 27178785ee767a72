// Local SGD (train.local_sgd) under mpirun: windows of one step are the synchronous run bit for
// bit; a window's averaging is the mean of the models each rank trained alone, which the test
// trains independently (one process per rank's shard of the files), with gradient accumulation
// too; post-local SGD runs its first epochs synchronously; a run resumed mid-epoch (at an
// averaging) is bit-identical to a straight one, under dynamic loss scaling too, which leaves a
// float32 run's bits as they are and skips an overflow on any rank on every rank; spatial groups
// take the steps of data-parallel ranks; and what local SGD cannot combine with is refused naming
// the keys.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "crest/data/safetensors.hpp"
#include "crest/train/checkpoint.hpp"
#include "support/cli_util.hpp"
#include "support/loss_scaling_runs.hpp"
#include "support/same_training.hpp"
#include "support/weights_compare.hpp"

namespace crest {
namespace {

namespace fs = std::filesystem;
using test::expect_same_tensors;
using test::run_crest;
using test::run_crest_mpi;
using test::run_outputs;
using test::TempDir;
using test::worst_relative_difference;

const std::string kDemo = std::string(CREST_SOURCE_DIR) + "/configs/cosmoflow-demo.yaml";
// Small and deterministic (no dropout, sorted order), SGD with momentum 0.9.
const std::string kModel =
    "train --config " + kDemo +
    " model.conv_size=4 model.n_conv_layers=2 model.dropout=0 data.shuffle=false crest.threads=1 "
    "data.batch_size=1 ";
// The synthetic set: 16 samples, 8 steps per epoch on 2 ranks.
const std::string kDummy = kModel +
                           "data.n_train=16 data.n_valid=4 data.sample_shape=[16,16,16,4] "
                           "model.input_shape=[16,16,16,4] ";

// `mean`'s tensors are the mean of `a`'s and `b`'s within 1e-6, and `a` and `b` differ (else the
// averaging would show nothing).
void expect_mean_of(const std::string& a_path, const std::string& b_path,
                    const std::string& mean_path) {
  SafetensorsFile a(a_path), b(b_path), mean(mean_path);
  double moved = 0;  // how far the two ranks' models were apart: the averaging mattered
  for (const auto& t : a.tensors()) {
    ASSERT_TRUE(t.dtype == SafetensorsDType::F32) << t.name;
    const auto* x = reinterpret_cast<const float*>(t.data);
    const auto* y = reinterpret_cast<const float*>(b.at(t.name).data);
    const auto* m = reinterpret_cast<const float*>(mean.at(t.name).data);
    double diff = 0, norm = 0;
    for (int64_t i = 0; i < t.numel(); ++i) {
      const float want = (x[i] + y[i]) * 0.5f;
      diff += (m[i] - want) * (m[i] - want);
      norm += static_cast<double>(want) * want;
      moved = std::max(moved, static_cast<double>(std::fabs(x[i] - y[i])));
    }
    EXPECT_LE(std::sqrt(diff), 1e-6 * std::sqrt(norm)) << t.name;
  }
  EXPECT_GT(moved, 1e-4) << "the two shards trained the same model: the test shows nothing";
}

TEST(LocalSgdMpi, WindowsOfOneStepAreTheSynchronousRunBitForBit) {
  const std::string args = kDummy + "data.n_epochs=1";
  test::expect_same_training(2, args, args + " 'train.local_sgd={steps: 1}'");
}

// 8 files of one sample each; rank r of 2 reads files r, r + 2, ... (strided shards, sorted
// order), which a directory holding just those files gives one process. One epoch of 4 steps per
// rank, one window of 4 (or of 2 updates of 2 accumulated micro-batches each): the 2-rank run's
// weights are the mean of the two processes' weights.
TEST(LocalSgdMpi, AnAveragingIsTheMeanOfTheModelsEachRankTrainedAlone) {
  TempDir d;
  const auto made = run_crest("datagen cosmoflow -o " + d.file("all") +
                              " --train 8 --valid 2 --size 32 --format npy --threads 1");
  ASSERT_EQ(made.code, 0) << made.out;
  for (int r = 0; r < 2; ++r) {
    const fs::path shard = d.file("shard" + std::to_string(r));
    fs::create_directories(shard / "train");
    fs::create_directory_symlink(d.file("all/validation"), shard / "validation");
    for (const auto& e : fs::directory_iterator(d.file("all/train"))) {
      const std::string name = e.path().filename().string();  // sample-00000K.data.npy
      const int k = name[12] - '0';
      if (k % 2 == r) fs::create_symlink(e.path(), shard / "train" / name);
    }
  }
  for (const auto& [window, accumulation] : std::vector<std::pair<std::string, std::string>>{
           {"4", ""}, {"2", " train.gradient_accumulation_frequency=2"}}) {
    SCOPED_TRACE("local_sgd.steps " + window + accumulation);
    const std::string files =
        kModel + "data.name=cosmo data.format=npy data.n_epochs=1" + accumulation + " ";
    for (int r = 0; r < 2; ++r) {
      const std::string name = "alone" + std::to_string(r) + window;
      const auto alone = run_crest(files + "data.n_train=4 data.n_valid=2 data.data_dir=" +
                                   d.file("shard" + std::to_string(r)) + run_outputs(d, name));
      ASSERT_EQ(alone.code, 0) << alone.out;
    }
    const auto local = run_crest_mpi(
        2, files + "data.n_train=8 data.n_valid=2 data.data_dir=" + d.file("all") +
               " 'train.local_sgd={steps: " + window + "}'" + run_outputs(d, "local" + window));
    ASSERT_EQ(local.code, 0) << local.out;
    expect_mean_of(d.file("alone0" + window + ".safetensors"),
                   d.file("alone1" + window + ".safetensors"),
                   d.file("local" + window + ".safetensors"));
  }
}

// start_epoch 1: epoch 1 is synchronous (its checkpoint is the synchronous run's, bit for bit),
// epoch 2 local (the runs part).
TEST(LocalSgdMpi, PostLocalSgdTrainsItsFirstEpochsSynchronously) {
  TempDir d;
  const std::string args = kDummy + "data.n_epochs=2";
  const auto sync = run_crest_mpi(2, args + run_outputs(d, "sync"));
  ASSERT_EQ(sync.code, 0) << sync.out;
  const auto post = run_crest_mpi(
      2, args + " 'train.local_sgd={steps: 3, start_epoch: 1}'" + run_outputs(d, "post"));
  ASSERT_EQ(post.code, 0) << post.out;
  const auto sync_kept = list_checkpoints(d.file("sync/checkpoints"));
  const auto post_kept = list_checkpoints(d.file("post/checkpoints"));
  ASSERT_EQ(sync_kept.size(), 2u);
  ASSERT_EQ(post_kept.size(), 2u);
  expect_same_tensors(sync_kept[0], post_kept[0]);  // after epoch 1: model and optimizer state
  EXPECT_GT(worst_relative_difference(d.file("sync.safetensors"), d.file("post.safetensors")),
            1e-4);
}

// Windows of 3 steps over epochs of 8: averagings at global steps 3, 6, 8 (the epoch's end), 9,
// 12, 15 and 16; step checkpoints every 6 steps (at averagings), the newest 3 kept: 6
// (mid-epoch 1), 12 (mid-epoch 2) and 16. A copy of the run directory without the newer ones
// resumes from each of 6 and 12.
// With accumulation 2 and windows of 3 updates, the averagings fall at global steps 6, 8, 12 and
// 16 and the same checkpoints are kept.
TEST(LocalSgdMpi, AResumeMidEpochIsBitIdentical) {
  for (const std::string& window :
       {std::string("'train.local_sgd={steps: 3}'"),
        std::string("'train.local_sgd={steps: 3}' train.gradient_accumulation_frequency=2"),
        std::string("'train.local_sgd={steps: 3}' train.loss_scaling=dynamic "
                    "train.loss_scale_growth_interval=1")}) {
    SCOPED_TRACE(window);
    TempDir d;
    const std::string args =
        kDummy + "data.n_epochs=2 " + window + " 'train.checkpoint_every=6 steps'";
    const auto straight = run_crest_mpi(2, args + run_outputs(d, "straight"));
    ASSERT_EQ(straight.code, 0) << straight.out;
    const auto kept = list_checkpoints(d.file("straight/checkpoints"));
    ASSERT_EQ(kept.size(), 3u) << straight.out;
    EXPECT_NE(kept[0].find("000000000006"), std::string::npos) << kept[0];
    test::expect_resumes_end_as_straight(
        d, kept, {1, 0}, [](const std::string& resume) { return run_crest_mpi(2, resume); });
  }
}

// crest bench train --local-sgd: no gradient exchanges (the averaging is not one), a window's mean
// step its cost, the best of the timed windows' beside the mean of all; refused with the lag, as
// train.local_sgd is.
TEST(LocalSgdMpi, BenchTrainTimesWholeWindows) {
  const std::string bench =
      "bench train --model cosmoflow --size 32 --conv-size 4 --batch 1 --steps 4 --warmup 1 "
      "--threads 1 ";
  const auto r = run_crest_mpi(2, bench + "--local-sgd 4");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto lines = test::json_lines(r.out);
  ASSERT_EQ(lines.size(), 1u) << r.out;
  EXPECT_EQ(lines[0]["local_sgd_steps"], 4);
  EXPECT_EQ(lines[0]["allreduce_s_per_step"].get<double>(), 0);
  EXPECT_GE(lines[0]["step_s_mean"].get<double>(), lines[0]["step_s_min"].get<double>());
  // One window timed: its mean is the run's (both the slowest rank's).
  EXPECT_DOUBLE_EQ(lines[0]["window_step_s_min"].get<double>(),
                   lines[0]["step_s_mean"].get<double>());
  const auto windows = test::json_lines(
      run_crest_mpi(2,
                    "bench train --model cosmoflow --size 32 --conv-size 4 --batch 1 --steps 8 "
                    "--warmup 1 --threads 1 --local-sgd 4")
          .out);
  ASSERT_EQ(windows.size(), 1u);
  EXPECT_LE(windows[0]["window_step_s_min"].get<double>(),
            windows[0]["step_s_mean"].get<double>() * (1 + 1e-12));
  EXPECT_GE(windows[0]["window_step_s_min"].get<double>(), windows[0]["step_s_min"].get<double>());
  const auto synchronous = test::json_lines(run_crest_mpi(2, bench).out);
  ASSERT_EQ(synchronous.size(), 1u);
  EXPECT_GT(synchronous[0]["allreduce_s_per_step"].get<double>(), 0);
  const auto refused = run_crest_mpi(2, bench + "--local-sgd 4 --gradient-lag 1");
  EXPECT_EQ(refused.code, 2) << refused.out;
  EXPECT_NE(refused.out.find("--local-sgd does not combine with --gradient-lag"), std::string::npos)
      << refused.out;
}

// Dynamic loss scaling (fp16's default) under local SGD: S = 2^16 growing every step, each rank
// unscales its own gradients, so a float32 run has the bits of the unscaled one; the scale grew
// alike on every rank (one scaler in the checkpoints: the resume test below).
TEST(LocalSgdMpi, LossScalingLeavesTheUnscaledRunsBits) {
  TempDir d;
  test::expect_loss_scaling_leaves_the_bits(
      d, 2, kDummy + "data.n_epochs=2 'train.local_sgd={steps: 3}'", "local");
}

// An infinity in rank 1's gradients at step 3: the ranks agree on it, every rank skips that
// update and halves S, so the run ends where one with the infinity on both ranks does, and not
// where one without it does.
TEST(LocalSgdMpi, AnOverflowOnOneRankSkipsTheStepOnEveryRank) {
  TempDir d;
  test::expect_an_overflow_on_rank_1_is_skipped_everywhere(
      d, kDummy + "data.n_epochs=1 'train.local_sgd={steps: 4}' train.loss_scaling=dynamic ");
}

TEST(LocalSgdMpi, WhatItCannotCombineWithIsRefusedNamingTheKeys) {
  test::expect_refused(
      kDummy, "local_sgd",
      {{"'train.local_sgd={steps: 0}'", "train.local_sgd.steps"},
       {"'train.local_sgd={steps: 4, every: 2}'", "local_sgd accepts: steps, start_epoch"},
       {"train.local_sgd=4", "expected {steps: H, start_epoch: E}"},
       {"'train.local_sgd={steps: 4}' train.gradient_lag=1", "gradient_lag 1"},
       {"'train.local_sgd={steps: 4}' 'train.checkpoint_every=6 steps'", "a multiple of 4 steps"},
       {"'train.local_sgd={steps: 4}' train.gradient_accumulation_frequency=2 "
        "'train.checkpoint_every=4 steps'",
        "a multiple of 8 steps"}});
}

// Local SGD with each sample split spatially: every local step first averages a group's shares
// of the replicated gradients over the group (the dense head's parts are each rank's own), so 2
// groups of 2 ranks take the steps of 2 data-parallel ranks with the same windows (float64,
// 1e-10): the groups' models drift apart and are averaged as the ranks' are.
TEST(LocalSgdMpi, SpatialGroupsTakeTheStepsOfDataParallelRanks) {
  TempDir d;
  const std::string run = kDummy +
                          "data.n_epochs=1 crest.backend=reference crest.precision=float64 "
                          "'train.local_sgd={steps: 2}' ";
  const auto two = run_crest_mpi(2, run + test::run_outputs(d, "two"));
  ASSERT_EQ(two.code, 0) << two.out;
  const auto four = run_crest_mpi(4, run + "dist.spatial=[2,1,1]" + test::run_outputs(d, "four"));
  ASSERT_EQ(four.code, 0) << four.out;
  EXPECT_NE(four.out.find("local SGD: models averaged every 2 steps"), std::string::npos)
      << four.out;
  EXPECT_LE(worst_relative_difference(d.file("two.safetensors"), d.file("four.safetensors")),
            1e-10);
  const auto sync = run_crest_mpi(2, kDummy +
                                         "data.n_epochs=1 crest.backend=reference "
                                         "crest.precision=float64 " +
                                         test::run_outputs(d, "sync"));
  ASSERT_EQ(sync.code, 0) << sync.out;
  EXPECT_GT(worst_relative_difference(d.file("two.safetensors"), d.file("sync.safetensors")), 1e-6);
}

}  // namespace
}  // namespace crest
