// Gradient lag (train.gradient_lag) under mpirun: lag 0 is the synchronous run bit for bit; with
// lag 1, two ranks (data-parallel, accumulating micro-batches, or one sample split between them)
// take the steps of one process with the same global batch, whose lagged updates differ from
// synchronous ones; a lag from the second epoch leaves the first synchronous; a run resumed
// mid-epoch or at an epoch's end (with an accumulation window
// open too), from the checkpoint's lagged gradient, is bit-identical to a straight one; under
// dynamic loss scaling the lagged run is the unscaled one bit for bit, an overflow skips the next
// update on every rank, and a resume is exact; and what the lag cannot combine with yet is refused
// naming the keys. With the local correction (delayed gradient averaging) the run stays near the
// synchronous one, resumes exactly, and a non-finite gradient on one rank stops both together.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "crest/data/safetensors.hpp"
#include "crest/train/checkpoint.hpp"
#include "support/cli_util.hpp"
#include "support/same_training.hpp"
#include "support/tiny_run.hpp"
#include "support/weights_compare.hpp"

namespace crest {
namespace {

using test::expect_same_tensors;
using test::run_crest;
using test::run_crest_mpi;
using test::run_outputs;
using test::TempDir;
using test::worst_relative_difference;

// 6 steps per epoch on 2 ranks of batch 1 (support/tiny_run.hpp).
const std::string kSmall = test::tiny_sorted_training();

TEST(GradientLagMpi, LagZeroIsTheSynchronousRunBitForBit) {
  const std::string args = kSmall + "data.n_epochs=1 data.batch_size=1";
  test::expect_same_training(2, args, args + " train.gradient_lag=0");
}

// Strided sharding: rank r's step j reads sample 2 j + r, so each step of two ranks covers the
// samples of one process's batch of 2, and the lagged average is that batch's gradient.
TEST(GradientLagMpi, TwoRanksTakeTheLaggedStepsOfOneProcessWithTheGlobalBatch) {
  TempDir d;
  const std::string lag = kSmall + "data.n_epochs=1 train.gradient_lag=1 ";
  const auto one = run_crest(lag + "data.batch_size=2" + run_outputs(d, "one"));
  ASSERT_EQ(one.code, 0) << one.out;
  // The lag changes the training: the same run without it ends elsewhere.
  const auto sync =
      run_crest(kSmall + "data.n_epochs=1 data.batch_size=2" + run_outputs(d, "sync"));
  ASSERT_EQ(sync.code, 0) << sync.out;
  EXPECT_GT(worst_relative_difference(d.file("one.safetensors"), d.file("sync.safetensors")), 1e-3);
  // LAMB's trust ratios amplify float32 rounding: its synchronous runs differ as much (1.4e-5 on
  // fc1.bias, 2026-12-02).
  const struct {
    std::string name, args;
    double tolerance;
  } runs[] = {{"data-parallel", "data.batch_size=1", 1e-5},
              {"LAMB, data-parallel",
               "data.batch_size=1 'optimizer={name: LAMB, weight_decay: 0.01}'", 3e-5},
              {"one sample split in two", "data.batch_size=2 dist.spatial=[2,1,1]", 1e-5},
              {"2 ranks x 2 micro-batches of 1 against one process's batch of 4 (below)",
               "data.batch_size=1 train.gradient_accumulation_frequency=2", 1e-5}};
  for (const auto& r : runs) {
    SCOPED_TRACE(r.name);
    const bool lamb = r.name.find("LAMB") != std::string::npos;
    const bool windows = r.name.find("micro-batches") != std::string::npos;
    std::string reference = d.file("one.safetensors");
    if (windows) {  // 12 samples: 3 windows of 4, each one update
      const auto four = run_crest(lag + "data.batch_size=4" + run_outputs(d, "one_four"));
      ASSERT_EQ(four.code, 0) << four.out;
      reference = d.file("one_four.safetensors");
    }
    if (lamb) {
      const auto one_lamb = run_crest(lag +
                                      "data.batch_size=2 'optimizer={name: LAMB, "
                                      "weight_decay: 0.01}'" +
                                      run_outputs(d, "one_lamb"));
      ASSERT_EQ(one_lamb.code, 0) << one_lamb.out;
      reference = d.file("one_lamb.safetensors");
    }
    const std::string name = "two_" + std::to_string(&r - runs);
    const auto two = run_crest_mpi(2, lag + r.args + run_outputs(d, name));
    ASSERT_EQ(two.code, 0) << two.out;
    EXPECT_LE(worst_relative_difference(reference, d.file(name + ".safetensors")), r.tolerance);
  }
}

// `crest ARGS` on 2 ranks whose allreduces each wait 0.1 s (the gradients' 302 KB at 3 MB/s)
// before they change the values: a checkpoint that did not wait for the lagged gradient's
// allreduce would hold this rank's own gradient instead of the average.
test::CliRun run_on_a_slow_link(const std::string& args) {
  return test::run_mpirun("-x CREST_TEST_ALLREDUCE_BYTES_PER_S=3000000 -np 2 " +
                          std::string(CREST_BINARY) + " " + args);
}

// A straight 2-epoch run with the lag `lag` keeps its checkpoints of steps 6 (epoch 1's end), 9
// (mid-epoch 2) and 12; a copy of its run directory without the newer ones resumes from each of
// the older two, on the slow link.
void expect_exact_resumes_on_a_slow_link(const std::string& lag) {
  TempDir d;
  const std::string args =
      kSmall + lag + " data.n_epochs=2 data.batch_size=1 'train.checkpoint_every=3 steps'";
  const auto straight = run_on_a_slow_link(args + run_outputs(d, "straight"));
  ASSERT_EQ(straight.code, 0) << straight.out;
  const auto kept = list_checkpoints(d.file("straight/checkpoints"));
  ASSERT_EQ(kept.size(), 3u) << straight.out;
  test::expect_resumes_end_as_straight(d, kept, {1, 0}, run_on_a_slow_link);
}

TEST(GradientLagMpi, AResumeMidEpochOrAtAnEpochsEndIsBitIdentical) {
  expect_exact_resumes_on_a_slow_link("train.gradient_lag=1");
}

// train.gradient_lag: {steps: 1, start_epoch: 1}: the first epoch is the synchronous run's bit
// for bit; the second is lagged — two ranks take one process's lagged steps, and a resume from
// the first epoch's end (the lagged gradient not yet there) or from mid-epoch 2 is exact.
TEST(GradientLagMpi, ALagFromTheSecondEpochIsSynchronousUntilThen) {
  TempDir d;
  const std::string from_two = kSmall + "'train.gradient_lag={steps: 1, start_epoch: 1}' ";
  const auto sync_one =
      run_crest_mpi(2, kSmall + "data.n_epochs=1 data.batch_size=1" + run_outputs(d, "sync_one"));
  ASSERT_EQ(sync_one.code, 0) << sync_one.out;
  const auto lag_one =
      run_crest_mpi(2, from_two + "data.n_epochs=1 data.batch_size=1" + run_outputs(d, "lag_one"));
  ASSERT_EQ(lag_one.code, 0) << lag_one.out;
  EXPECT_NE(lag_one.out.find("after 1 synchronous epochs"), std::string::npos) << lag_one.out;
  expect_same_tensors(d.file("sync_one.safetensors"), d.file("lag_one.safetensors"));

  const std::string two_epochs = from_two + "data.n_epochs=2 ";
  const auto straight =
      run_crest_mpi(2, two_epochs + "data.batch_size=1 'train.checkpoint_every=3 steps'" +
                           run_outputs(d, "straight"));
  ASSERT_EQ(straight.code, 0) << straight.out;
  const auto sync_two =
      run_crest_mpi(2, kSmall + "data.n_epochs=2 data.batch_size=1" + run_outputs(d, "sync_two"));
  ASSERT_EQ(sync_two.code, 0) << sync_two.out;
  EXPECT_GT(
      worst_relative_difference(d.file("straight.safetensors"), d.file("sync_two.safetensors")),
      1e-3)
      << "the second epoch was not lagged";
  const auto one = run_crest(two_epochs + "data.batch_size=2" + run_outputs(d, "one"));
  ASSERT_EQ(one.code, 0) << one.out;
  EXPECT_LE(worst_relative_difference(d.file("one.safetensors"), d.file("straight.safetensors")),
            1e-5);
  const auto kept = list_checkpoints(d.file("straight/checkpoints"));
  ASSERT_EQ(kept.size(), 3u) << straight.out;
  test::expect_resumes_end_as_straight(
      d, kept, {1, 0}, [](const std::string& args) { return run_crest_mpi(2, args); });
}

// With accumulation the lag is a window's. 6 micro-batches per rank and epoch, windows of 4:
// epoch 1 ends with two micro-batches summed and the first window's gradient not yet applied.
TEST(GradientLagMpi, AResumeWithAnOpenAccumulationWindowIsBitIdentical) {
  test::expect_resume_after_an_epoch_is_exact(
      2, kSmall + "data.batch_size=1 train.gradient_accumulation_frequency=4 train.gradient_lag=1");
}

// Dynamic loss scaling with the scale doubling every step: the lagged gradient goes aside
// unscaled by its own step's scale (a power of two: exact), so the run ends where the unscaled
// lagged run does, bit for bit, on one rank (a pass of its own) and on two (the allreduce's).
TEST(GradientLagMpi, UnderLossScalingTheLaggedRunIsTheUnscaledOneBitForBit) {
  TempDir d;
  const std::string lag = kSmall + "data.n_epochs=1 data.batch_size=1 train.gradient_lag=1 ";
  for (const int ranks : {1, 2}) {
    SCOPED_TRACE(std::to_string(ranks) + " ranks");
    const std::string n = std::to_string(ranks);
    const auto plain = run_crest_mpi(ranks, lag + run_outputs(d, "plain" + n));
    ASSERT_EQ(plain.code, 0) << plain.out;
    const auto scaled =
        run_crest_mpi(ranks, lag + "train.loss_scaling=dynamic train.loss_scale_growth_interval=1" +
                                 run_outputs(d, "scaled" + n));
    ASSERT_EQ(scaled.code, 0) << scaled.out;
    // From 2^16, doubling after every update: 2^21 after 6 steps on 2 ranks, the cap 2^24 after
    // 12 on one.
    EXPECT_NE(scaled.out.find(ranks == 1 ? "loss_scale 16777216" : "loss_scale 2097152"),
              std::string::npos)
        << "the scale grew every step:\n"
        << scaled.out;
    expect_same_tensors(d.file("plain" + n + ".safetensors"),
                        d.file("scaled" + n + ".safetensors"));
  }
}

// An infinity in step 3's gradients on one of two ranks: step 4 would apply them, so step 4 skips
// its update and halves the scale on both ranks — as an infinity on both does — and the run
// differs from one without it.
TEST(GradientLagMpi, UnderLossScalingAnOverflowSkipsTheUpdateThatWouldApplyIt) {
  TempDir d;
  const std::string args = kSmall +
                           "data.n_epochs=2 data.batch_size=1 train.gradient_lag=1 "
                           "train.loss_scaling=dynamic";
  auto two_ranks = [&](const std::string& env, const std::string& name) {
    return test::run_mpirun(
        "-np 2 " + env + " " + std::string(CREST_BINARY) + " " + args + run_outputs(d, name), 300);
  };
  const auto one = two_ranks("-x CREST_TEST_GRAD_OVERFLOW_AT_STEP=3@1", "one");
  ASSERT_EQ(one.code, 0) << one.out;
  EXPECT_NE(one.out.find("global step 4: gradient overflow at loss scale 65536; update skipped, "
                         "loss scale now 32768"),
            std::string::npos)
      << one.out;
  const auto both = two_ranks("-x CREST_TEST_GRAD_OVERFLOW_AT_STEP=3", "both");
  ASSERT_EQ(both.code, 0) << both.out;
  const auto none = two_ranks("", "none");
  ASSERT_EQ(none.code, 0) << none.out;
  expect_same_tensors(d.file("one.safetensors"), d.file("both.safetensors"));
  EXPECT_GT(worst_relative_difference(d.file("one.safetensors"), d.file("none.safetensors")), 0)
      << "the skip changed nothing";
}

// The checkpoint holds the unscaled lagged gradient and the scaler's state.
TEST(GradientLagMpi, UnderLossScalingAResumeIsBitIdentical) {
  test::expect_resume_after_an_epoch_is_exact(
      2, kSmall +
             "data.batch_size=1 train.gradient_lag=1 train.loss_scaling=dynamic "
             "train.loss_scale_growth_interval=2");
}

// train.gradient_lag.correction: local (delayed gradient averaging). Each rank applies the
// previous step's average less its own share of it plus its own fresh gradient, so the mean of the
// ranks' updates is the synchronous one: on one process the run is the synchronous run bit for
// bit, and on two it ends nearer the synchronous run than the uncorrected lag does (2026-12-07:
// 0.58 times as far, per unit of the weights' norm, after one epoch and after two). The ranks'
// models are averaged at each epoch's end and at each checkpoint, whose resume mid-epoch or at an
// epoch's end is exact.
const std::string kCorrected = "'train.gradient_lag={steps: 1, correction: local}' ";

TEST(GradientLagMpi, TheLocalCorrectionKeepsTheRanksNearTheSynchronousRun) {
  const std::string one = kSmall + "data.n_epochs=1 data.batch_size=2";
  test::expect_same_training(1, one, one + " " + kCorrected);
  TempDir d;
  const std::string args = kSmall + "data.n_epochs=2 data.batch_size=1 ";
  const auto sync = run_crest_mpi(2, args + run_outputs(d, "sync"));
  ASSERT_EQ(sync.code, 0) << sync.out;
  const auto lag = run_crest_mpi(2, args + "train.gradient_lag=1" + run_outputs(d, "lag"));
  ASSERT_EQ(lag.code, 0) << lag.out;
  const auto corrected = run_crest_mpi(2, args + kCorrected + run_outputs(d, "corrected"));
  ASSERT_EQ(corrected.code, 0) << corrected.out;
  EXPECT_NE(corrected.out.find("with each rank's own gradient in its share's place"),
            std::string::npos)
      << corrected.out;
  const double lag_off =
      test::whole_relative_difference(d.file("sync.safetensors"), d.file("lag.safetensors"));
  const double corrected_off =
      test::whole_relative_difference(d.file("sync.safetensors"), d.file("corrected.safetensors"));
  EXPECT_GT(corrected_off, 0) << "the correction ran synchronously";
  EXPECT_LT(corrected_off, 0.75 * lag_off) << "lag " << lag_off << ", corrected " << corrected_off;
}

// Under dist.spatial a rank's gradient is a share of its sample's: each group averages its shares
// (synchronously) before the correction, so one sample split in two takes the synchronous steps
// of one process (nothing to correct on one replica), and 2 groups of 2 those of 2 ranks with the
// corrected lag (float64, 1e-10).
TEST(GradientLagMpi, WithTheLocalCorrectionASplitSampleTakesItsWholeSamplesSteps) {
  TempDir d;
  const std::string f64 =
      kSmall + "data.n_epochs=1 data.batch_size=2 crest.backend=reference crest.precision=float64 ";
  const struct {
    std::string reference, split;
    int reference_ranks, split_ranks;
  } pairs[] = {{f64, f64 + kCorrected + "dist.spatial=[2,1,1]", 1, 2},
               {f64 + kCorrected, f64 + kCorrected + "dist.spatial=[2,1,1]", 2, 4}};
  for (const auto& p : pairs) {
    const std::string at = std::to_string(&p - pairs);
    const auto reference =
        run_crest_mpi(p.reference_ranks, p.reference + run_outputs(d, "reference" + at));
    ASSERT_EQ(reference.code, 0) << reference.out;
    const auto split = run_crest_mpi(p.split_ranks, p.split + run_outputs(d, "split" + at));
    ASSERT_EQ(split.code, 0) << split.out;
    EXPECT_LE(worst_relative_difference(d.file("reference" + at + ".safetensors"),
                                        d.file("split" + at + ".safetensors")),
              1e-10)
        << at;
  }
  EXPECT_GT(
      worst_relative_difference(d.file("reference0.safetensors"), d.file("split1.safetensors")),
      1e-6);
}

TEST(GradientLagMpi, WithTheLocalCorrectionAResumeMidEpochOrAtAnEpochsEndIsBitIdentical) {
  expect_exact_resumes_on_a_slow_link(kCorrected);
}

// An infinity in step 3's gradients on one of two ranks: that rank's corrected update would hold
// it, so it takes the average alone there, as the other rank's check does; step 4's average
// carries it to both, which stop there together, naming it (train.on_nonfinite: stop).
TEST(GradientLagMpi, WithTheLocalCorrectionANonFiniteGradientOnOneRankStopsBothAtTheNextStep) {
  TempDir d;
  const auto one = test::run_mpirun("-np 2 -x CREST_TEST_GRAD_OVERFLOW_AT_STEP=3@1 " +
                                        std::string(CREST_BINARY) + " " + kSmall + kCorrected +
                                        "data.n_epochs=1 data.batch_size=1" + run_outputs(d, "one"),
                                    300);
  EXPECT_NE(one.code, 0) << one.out;
  EXPECT_NE(one.out.find("global step 4"), std::string::npos) << one.out;
  EXPECT_EQ(one.out.find("global step 3"), std::string::npos) << one.out;
}

// `bench train --gradient-lag 1 --lag-correction local` times the corrected lag (its JSON says
// so); the option's bad values and what it needs are refused, exit 2.
TEST(GradientLagMpi, BenchTrainTimesTheCorrectedLagAndRefusesWhatItCannotTime) {
  const std::string bench =
      "bench train --model cosmoflow --size 32 --conv-size 4 --batch 1 --steps 2 --warmup 1 "
      "--threads 1 --gradient-lag 1 ";
  const auto lines = test::json_lines(run_crest_mpi(2, bench + "--lag-correction local").out);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["lag_correction"], "local");
  EXPECT_EQ(lines[0]["gradient_lag"], 1);
  const struct {
    std::string args, says;
  } bad[] = {{bench + "--lag-correction yes", "--lag-correction is none or local, got 'yes'"},
             {"bench train --model cosmoflow --size 32 --conv-size 4 --lag-correction local",
              "--lag-correction local corrects --gradient-lag 1"}};
  for (const auto& b : bad) {
    const auto refused = run_crest_mpi(2, b.args);
    EXPECT_EQ(refused.code, 2) << refused.out;
    EXPECT_NE(refused.out.find(b.says), std::string::npos) << refused.out;
  }
}

TEST(GradientLagMpi, WhatItCannotCombineWithIsRefusedNamingTheKeys) {
  test::expect_refused(kSmall, "gradient_lag",
                       {{"train.gradient_lag=2", "train.gradient_lag"},
                        {"train.gradient_lag=1 'train.local_sgd={steps: 2}'",
                         "local_sgd.steps 2 with gradient_lag 1"},
                        {"'train.gradient_lag={steps: 0, start_epoch: 1}'", "no lag to start"},
                        {"'train.gradient_lag={steps: 1, start: 1}'",
                         "unknown key (gradient_lag accepts: steps, start_epoch, correction)"},
                        {"'train.gradient_lag={steps: 0, correction: local}'",
                         "correction: local corrects a lag: it needs steps: 1"},
                        {"'train.gradient_lag={steps: 1, correction: yes}'",
                         "train.gradient_lag.correction (from override"},
                        {"'train.gradient_lag={steps: 2}'", "train.gradient_lag.steps"},
                        {"'train.gradient_lag=[1]'", "expected 0, 1 or {steps: 0 | 1"}});
}

}  // namespace
}  // namespace crest
