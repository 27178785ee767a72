// dist.pipeline under crest train (2 ranks: two stages; 3: three; 4: two stages x two replicas):
// the run takes the steps of one process (two ranks) accumulating the same micro-batches — dropout
// on, both schedules, with and without recomputation, 1e-10 in float64 (reference backend) and 1e-5
// in float32 (oneDNN) — and validates as that process does, from a whole model's weights file
// too; its checkpoints hold the whole model, so a run resumed mid-epoch continues bit for bit, and
// one resumed at an epoch's end under another cut and schedule continues within 1e-10 (float64);
// a non-finite step names the first bad gradient as one process does; the gradient lag takes the
// steps of one process (and of two ranks) accumulating with the lag, and resumes mid-epoch bit for
// bit with the lagged gradient in the checkpoint; dynamic loss scaling leaves a float32 run's bits
// (with the lag too), an overflow on the last stage skips the step on every stage, and a resumed
// run keeps its scale; synchronised batch norm over
// two replicas takes the steps of two ranks accumulating in one batch-norm group; stages split
// spatially (4 ranks: 2 stages x 2-rank groups) take one process's steps, CosmoFlow and DeepCAM,
// and resume mid-epoch bit for bit; what a pipeline does not combine with yet is refused naming
// the keys.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "crest/train/checkpoint.hpp"
#include "support/batch_norm_graph.hpp"
#include "support/cli_util.hpp"
#include "support/loss_scaling_runs.hpp"
#include "support/same_training.hpp"
#include "support/tiny_run.hpp"
#include "support/weights_compare.hpp"

namespace crest {
namespace {

using test::run_crest;
using test::run_crest_mpi;
using test::run_outputs;
using test::TempDir;
using test::worst_relative_difference;

// 12 samples in order, dropout on (its masks must not depend on the stages): 3 batches of 4 per
// epoch, each 2 micro-batches of 2.
const std::string kSmall = test::tiny_sorted_training() + "model.dropout=0.5 data.n_epochs=1 ";
const std::string kPipeline = "data.batch_size=4 'dist.pipeline={stages: 2, micro_batches: 2";
const std::string kOneProcess = "data.batch_size=2 train.gradient_accumulation_frequency=2";

// The epochs' validation losses a run's newest checkpoint recorded (exact: hex floats).
std::vector<double> val_losses(const std::string& run) {
  const auto kept = list_checkpoints(run + "/checkpoints");
  EXPECT_FALSE(kept.empty()) << run;
  std::vector<double> losses;
  if (kept.empty()) return losses;
  for (const EpochStats& e : read_checkpoint_info(kept.back()).history)
    losses.push_back(e.val_loss);
  return losses;
}

// Run d/PIPELINE (its directory and weights) ended within 1e-10 of run d/REFERENCE (float64): the
// weights and the first epoch's validation loss.
void expect_same_run(const TempDir& d, const std::string& reference, const std::string& pipeline) {
  EXPECT_LE(worst_relative_difference(d.file(reference + ".safetensors"),
                                      d.file(pipeline + ".safetensors")),
            1e-10);
  const double want = val_losses(d.file(reference))[0];
  EXPECT_NEAR(val_losses(d.file(pipeline))[0], want, 1e-10 * want);
}

// One training run: its ranks and its `crest train` arguments (the outputs added).
struct Run {
  int ranks;
  std::string args;
};

// `reference` as d/REF and `pipeline` as d/PIPE: the pipeline run's output holds each of `says`,
// and it ends as the reference did (expect_same_run).
void expect_pipeline_takes_its_steps(const TempDir& d, const std::string& ref, const Run& reference,
                                     const std::string& pipe, const Run& pipeline,
                                     const std::vector<std::string>& says) {
  const auto a = run_crest_mpi(reference.ranks, reference.args + run_outputs(d, ref), 600);
  ASSERT_EQ(a.code, 0) << a.out;
  const auto b = run_crest_mpi(pipeline.ranks, pipeline.args + run_outputs(d, pipe), 600);
  ASSERT_EQ(b.code, 0) << b.out;
  for (const std::string& s : says) EXPECT_NE(b.out.find(s), std::string::npos) << s << b.out;
  expect_same_run(d, ref, pipe);
}

TEST(PipelineTrain, TakesTheStepsOfOneProcessAccumulatingTheMicroBatches) {
  TempDir d;
  const struct {
    std::string name, precision, pipeline;
    double tolerance;
  } runs[] = {
      {"float64 gpipe", "crest.backend=reference crest.precision=float64", "schedule: gpipe}'",
       1e-10},
      {"float64 1f1b, recomputed", "crest.backend=reference crest.precision=float64",
       "schedule: 1f1b, recompute: true}'", 1e-10},
      {"float32 1f1b", "", "}'", 1e-5},
  };
  for (const auto& r : runs) {
    SCOPED_TRACE(r.name);
    const std::string one = "one_" + std::to_string(&r - runs);
    const std::string two = "two_" + std::to_string(&r - runs);
    const auto a = run_crest(kSmall + r.precision + " " + kOneProcess + run_outputs(d, one));
    ASSERT_EQ(a.code, 0) << a.out;
    const auto b = run_crest_mpi(
        2, kSmall + r.precision + " " + kPipeline + ", " + r.pipeline + run_outputs(d, two));
    ASSERT_EQ(b.code, 0) << b.out;
    EXPECT_NE(b.out.find("dist.pipeline: 2 stages x 1 data-parallel"), std::string::npos) << b.out;
    // The last stage reads the targets alone (targets_of_samples); the same losses say they are
    // the right ones.
    EXPECT_NE(b.out.find("act1 .. loss, reads the targets alone (y)"), std::string::npos) << b.out;
    EXPECT_LE(worst_relative_difference(d.file(one + ".safetensors"), d.file(two + ".safetensors")),
              r.tolerance);
    const std::vector<double> expected = val_losses(d.file(one)), got = val_losses(d.file(two));
    ASSERT_EQ(expected.size(), got.size());
    for (size_t e = 0; e < got.size(); ++e)
      EXPECT_NEAR(got[e], expected[e], r.tolerance * std::abs(expected[e])) << "epoch " << e + 1;
  }
}

// dist.pipeline.balance: time cuts where one measured step of the whole model (on rank 0, at the
// micro-batch size) balances, every rank alike; wherever it cuts, the run takes one process's
// steps (float64, 1e-10).
TEST(PipelineTrain, ATimeBalancedCutTakesTheStepsOfOneProcess) {
  TempDir d;
  const std::string f64 = kSmall + "crest.backend=reference crest.precision=float64 ";
  expect_pipeline_takes_its_steps(d, "one", {1, f64 + kOneProcess}, "two",
                                  {2, f64 + kPipeline + ", balance: time}'"},
                                  {"stages cut where their measured time balances"});
  // A dry run runs nothing: the FLOPs decide, and the header says so. Each stage's line says what
  // it plans (rank 0's is its "planned memory") and how many activation sets 1F1B keeps there.
  const auto dry = run_crest_mpi(2, f64 + kPipeline + ", balance: time}' --dry-run");
  ASSERT_EQ(dry.code, 0) << dry.out;
  EXPECT_NE(dry.out.find("stages cut where their FLOPs balance"), std::string::npos) << dry.out;
  std::smatch first, planned;
  ASSERT_TRUE(std::regex_search(dry.out, first,
                                std::regex("stage 0 \\(.*, plans ([0-9.]+ [KMG]?i?B) "
                                           "\\(2 activation sets\\)")))
      << dry.out;
  ASSERT_TRUE(
      std::regex_search(dry.out, planned, std::regex("planned memory: ([0-9.]+ [KMG]?i?B)")))
      << dry.out;
  EXPECT_EQ(first[1].str(), planned[1].str());
  EXPECT_NE(dry.out.find("sends nothing (the loss), plans "), std::string::npos) << dry.out;
  EXPECT_NE(dry.out.find(" (1 activation set)"), std::string::npos) << dry.out;
}

// The time-balanced cut runs the whole model on rank 0 at the micro-batch size, under the rank's
// memory limit: where the whole model does not fit, every rank stops naming the cuts that need no
// measuring.
TEST(PipelineTrain, AWholeModelTooLargeToMeasureNamesTheCutsThatNeedNoMeasuring) {
  TempDir d;
  const auto r = run_crest_mpi(
      2, kSmall + kPipeline +
             ", balance: time}' crest.max_memory_gb=0.0001 output_dir=" + d.file("run"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("dist.pipeline.balance time: measuring the whole model: crest.max_memory_gb "
                       "0.0001: the compiled program needs"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("(dist.pipeline.balance: flops, or a cut named in "
                       "dist.pipeline.stage_starts, cuts without running the whole model)"),
            std::string::npos)
      << r.out;
}

// What follows "first non-finite gradient: " in a run's output, up to the closing parenthesis: the
// tensor and how many of how many were bad ("" when absent).
std::string first_bad_gradient(const std::string& out) {
  const std::string mark = "first non-finite gradient: ";
  const size_t at = out.find(mark);
  if (at == std::string::npos) return "";
  const size_t from = at + mark.size();
  return out.substr(from, out.find(')', from) + 1 - from);
}

// A NaN in the second batch's samples (the first stage's input): the run stops naming the first
// bad gradient in the whole model's order, and how many of the model's tensors were bad, as one
// process accumulating the same micro-batches names them (its third micro-batch is that batch's
// first). Dropout is off, so every gradient of both runs is NaN; the name is the first stage's.
TEST(PipelineTrain, ANonFiniteStepNamesTheFirstBadGradientAsOneProcessDoes) {
  TempDir d;
  const std::string run = test::tiny_sorted_training() + "data.n_epochs=1 train.on_nonfinite=stop ";
  const auto one =
      test::run_mpirun("-np 1 -x CREST_TEST_NONFINITE_AT_STEP=3 " + std::string(CREST_BINARY) +
                       " " + run + kOneProcess + " output_dir=" + d.file("one"));
  ASSERT_EQ(one.code, 1) << one.out;
  const std::string expected = first_bad_gradient(one.out);
  ASSERT_NE(expected.find(" of "), std::string::npos) << one.out;
  const auto two =
      test::run_mpirun("-np 2 -x CREST_TEST_NONFINITE_AT_STEP=2 " + std::string(CREST_BINARY) +
                       " " + run + kPipeline + "}' " + " output_dir=" + d.file("two"));
  EXPECT_EQ(two.code, 1) << two.out;
  EXPECT_EQ(first_bad_gradient(two.out), expected) << two.out;
  EXPECT_NE(two.out.find("(global step 2): first non-finite gradient: "), std::string::npos)
      << two.out;
}

// 2 stages x 2 replicas on 4 ranks: each replica reads its shard as a data-parallel rank does, so
// the run takes the steps of 2 ranks accumulating the same micro-batches.
TEST(PipelineTrain, TwoReplicasTakeTheStepsOfTwoRanksAccumulating) {
  TempDir d;
  const std::string f64 =
      kSmall + "data.n_train=16 data.n_valid=8 crest.backend=reference crest.precision=float64 ";
  expect_pipeline_takes_its_steps(d, "two", {2, f64 + kOneProcess}, "four",
                                  {4, f64 + kPipeline + "}'"},
                                  {"dist.pipeline: 2 stages x 2 data-parallel"});
}

// A batch norm in each of two stages (cut at conv2), float64.
const std::string kBatchNormConfig =
    test::batch_norm_graph_config(2, 16, 8, "{threads: 1, backend: reference, precision: float64}");

// dist.batchnorm_group_size 2 over 2 replicas of a 2-stage pipeline: micro-batch m of both
// replicas is normalised as one batch in each stage, as 2 data-parallel ranks accumulating in one
// group normalise theirs (weights and running statistics within 1e-10, float64). Without the
// group the replicas normalise alone: a different training.
TEST(PipelineTrain, SynchronisedBatchNormTakesTheStepsOfTwoRanksAccumulatingInOneGroup) {
  TempDir d;
  std::ofstream(d.file("bn.yaml")) << kBatchNormConfig;
  const std::string run = "train --config " + d.file("bn.yaml") + " ";
  const std::string pipeline =
      "data.batch_size=4 'dist.pipeline={stages: 2, micro_batches: 2, stage_starts: [conv2]}' ";
  const auto two =
      run_crest_mpi(2, run + kOneProcess + " dist.batchnorm_group_size=2" + run_outputs(d, "two"));
  ASSERT_EQ(two.code, 0) << two.out;
  // 1F1B, and GPipe recomputing each micro-batch's forward (its statistics summed again).
  for (const std::string schedule : {"1f1b}'", "gpipe, recompute: true}'"}) {
    SCOPED_TRACE(schedule);
    const std::string four = "four_" + schedule.substr(0, 4);
    const auto r = run_crest_mpi(
        4, run +
               "data.batch_size=4 'dist.pipeline={stages: 2, micro_batches: 2, stage_starts: "
               "[conv2], schedule: " +
               schedule + " dist.batchnorm_group_size=2" + run_outputs(d, four));
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("dist.pipeline: 2 stages x 2 data-parallel"), std::string::npos) << r.out;
    expect_same_run(d, "two", four);
  }
  const auto alone = run_crest_mpi(4, run + pipeline + run_outputs(d, "alone"));
  ASSERT_EQ(alone.code, 0) << alone.out;
  EXPECT_GT(worst_relative_difference(d.file("two.safetensors"), d.file("alone.safetensors")),
            1e-3);
  const auto odd =
      run_crest_mpi(4, run + pipeline + "dist.batchnorm_group_size=3" + run_outputs(d, "odd"));
  EXPECT_EQ(odd.code, 2) << odd.out;
  EXPECT_NE(odd.out.find("dist.batchnorm_group_size: 3 does not divide the 2 data-parallel "
                         "replicas of each pipeline stage"),
            std::string::npos)
      << odd.out;
}

// 3 stages: the middle one reads no data (its loaders are not even opened) and still runs every
// training and validation pass with the others.
TEST(PipelineTrain, ThreeStagesWhoseMiddleReadsNothing) {
  TempDir d;
  const std::string f64 = kSmall + "crest.backend=reference crest.precision=float64 ";
  const auto one = run_crest(f64 + kOneProcess + run_outputs(d, "one"));
  ASSERT_EQ(one.code, 0) << one.out;
  const auto three = run_crest_mpi(3, f64 +
                                          "data.batch_size=4 'dist.pipeline={stages: 3, "
                                          "micro_batches: 2, stage_starts: [conv2, fc1]}'" +
                                          run_outputs(d, "three"));
  ASSERT_EQ(three.code, 0) << three.out;
  EXPECT_NE(three.out.find("stage 1 (ranks 1, 4, ...): conv2 .. flatten, reads no data"),
            std::string::npos)
      << three.out;
  expect_same_run(d, "one", "three");
}

// --init-weights: a whole model's weights file (one process's run), which each stage takes its
// part of; the pipeline then trains as one process starting from the same file.
TEST(PipelineTrain, StartsFromAWholeModelsWeightsFile) {
  TempDir d;
  const std::string f64 = kSmall + "crest.backend=reference crest.precision=float64 ";
  const auto first = run_crest(f64 + "data.batch_size=4" + run_outputs(d, "first"));
  ASSERT_EQ(first.code, 0) << first.out;
  const std::string init = " --init-weights " + d.file("first.safetensors");
  const auto one = run_crest(f64 + kOneProcess + init + run_outputs(d, "one"));
  ASSERT_EQ(one.code, 0) << one.out;
  const auto two = run_crest_mpi(2, f64 + kPipeline + "}'" + init + run_outputs(d, "two"));
  ASSERT_EQ(two.code, 0) << two.out;
  const auto fresh = run_crest_mpi(2, f64 + kPipeline + "}'" + run_outputs(d, "fresh"));
  ASSERT_EQ(fresh.code, 0) << fresh.out;
  EXPECT_LE(worst_relative_difference(d.file("one.safetensors"), d.file("two.safetensors")), 1e-10);
  EXPECT_GT(worst_relative_difference(d.file("fresh.safetensors"), d.file("two.safetensors")), 1e-3)
      << "the weights file changed nothing";
}

// The whole model in every checkpoint: the first epoch cut after the convolutions under GPipe,
// the second resumed from its checkpoint under the FLOP-balanced cut and 1F1B, ends where a
// straight run under the latter does.
TEST(PipelineTrain, AResumeUnderAnotherCutAndScheduleContinuesTheRun) {
  TempDir d;
  const std::string f64 = kSmall + "crest.backend=reference crest.precision=float64 ";
  const auto straight =
      run_crest_mpi(2, f64 + kPipeline + "}' data.n_epochs=2" + run_outputs(d, "straight"));
  ASSERT_EQ(straight.code, 0) << straight.out;
  const auto first = run_crest_mpi(2, f64 + kPipeline +
                                          ", schedule: gpipe, stage_starts: [fc1]}' "
                                          "data.n_epochs=1 output_dir=" +
                                          d.file("first"));
  ASSERT_EQ(first.code, 0) << first.out;
  EXPECT_NE(first.out.find("stage 1 (ranks 1, 3, ...): fc1 .. loss"), std::string::npos)
      << first.out;
  const auto resumed =
      run_crest_mpi(2, "train --resume " + d.file("first") + " data.n_epochs=2 " + kPipeline +
                           "}' --save-weights " + d.file("resumed.safetensors"));
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  EXPECT_NE(resumed.out.find("resuming"), std::string::npos) << resumed.out;
  EXPECT_LE(
      worst_relative_difference(d.file("straight.safetensors"), d.file("resumed.safetensors")),
      1e-10);
}

// A straight 2-epoch run of `args` on `ranks` ranks keeps its checkpoints of steps 2 (mid-epoch
// 1), 4 (mid-epoch 2) and 6; a copy of its run directory without the newer ones resumes from each
// of the older two and ends bit for bit where the straight run did. (The test above resumes at an
// epoch's end.)
void expect_mid_epoch_resumes_are_bit_identical(int ranks, const std::string& args) {
  TempDir d;
  const auto straight = run_crest_mpi(ranks, args +
                                                 " data.n_epochs=2 'train.checkpoint_every=2 "
                                                 "steps' train.checkpoint_keep=10" +
                                                 run_outputs(d, "straight"));
  ASSERT_EQ(straight.code, 0) << straight.out;
  const auto kept = list_checkpoints(d.file("straight/checkpoints"));
  ASSERT_EQ(kept.size(), 3u) << straight.out;
  test::expect_resumes_end_as_straight(
      d, kept, {0, 1}, [ranks](const std::string& resume) { return run_crest_mpi(ranks, resume); });
}

TEST(PipelineTrain, AResumeMidEpochIsBitIdentical) {
  expect_mid_epoch_resumes_are_bit_identical(2, kSmall + kPipeline + "}'");
}

// Rank 0 writes a checkpoint as the stages send it their tensors; a write that fails half-way (as
// on a full disk: CREST_TEST_CHECKPOINT_WRITE_FAILS; a file-size limit would stop the ranks' MPI
// start-up) releases the stages still waiting for its requests, and leaves nothing in flight.
// Under `stop` every rank ends with the error naming the checkpoint a resume would use, which
// stays the only one; tolerated, training goes on, the next checkpoint is written whole and the
// run ends bit for bit where a straight run does. Neither hangs (the launcher's timeout).
TEST(PipelineTrain, ACheckpointWriteFailingHalfWayReleasesTheStages) {
  TempDir d;
  const std::string run = d.file("run");
  const std::string args = kSmall + kPipeline + "}' ";
  const auto first = run_crest_mpi(2, args + "output_dir=" + run);
  ASSERT_EQ(first.code, 0) << first.out;
  const auto kept = list_checkpoints(run + "/checkpoints");
  ASSERT_EQ(kept.size(), 1u) << first.out;
  const auto resume = [&](const std::string& failures) {
    // The resumed run's first write, at the end of epoch 2, fails.
    return test::run_mpirun("-np 2 -x CREST_TEST_CHECKPOINT_WRITE_FAILS=1 " +
                            std::string(CREST_BINARY) + " train --resume " + run +
                            " data.n_epochs=3 --save-weights " + d.file("resumed.safetensors") +
                            " train.checkpoint_failures=" + failures);
  };
  const std::string failed =
      "/checkpoints/ckpt-000000000006.safetensors: write failed: No space "
      "left on device";
  const auto stopped = resume("stop");
  EXPECT_EQ(stopped.code, 2) << stopped.out;
  EXPECT_NE(stopped.out.find(run + failed), std::string::npos) << stopped.out;
  EXPECT_NE(stopped.out.find("a resume would use " + kept[0]), std::string::npos) << stopped.out;
  EXPECT_EQ(list_checkpoints(run + "/checkpoints"), kept);
  for (const auto& e : std::filesystem::directory_iterator(run + "/checkpoints"))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();

  const auto tolerated = resume("tolerate");
  ASSERT_EQ(tolerated.code, 0) << tolerated.out;
  EXPECT_NE(tolerated.out.find("checkpoint failed: " + run + failed), std::string::npos)
      << tolerated.out;
  EXPECT_NE(tolerated.out.find("epoch 3/3"), std::string::npos) << tolerated.out;
  EXPECT_EQ(
      read_checkpoint_info(list_checkpoints(run + "/checkpoints").back()).position.global_step, 9);
  const auto straight = run_crest_mpi(2, args + "data.n_epochs=3" + run_outputs(d, "straight"));
  ASSERT_EQ(straight.code, 0) << straight.out;
  EXPECT_EQ(
      worst_relative_difference(d.file("straight.safetensors"), d.file("resumed.safetensors")), 0);
}

// `ARGS` as one process accumulating 2 micro-batches (d/one) and as 2 stages of a pipeline over 2
// micro-batches (d/two): the same run (float64, 1e-10).
void expect_two_stages_take_one_processs_steps(const TempDir& d, const std::string& args) {
  const auto one = run_crest(args + kOneProcess + run_outputs(d, "one"));
  ASSERT_EQ(one.code, 0) << one.out;
  const auto two = run_crest_mpi(2, args + kPipeline + "}'" + run_outputs(d, "two"));
  ASSERT_EQ(two.code, 0) << two.out;
  expect_same_run(d, "one", "two");
}

// train.gradient_lag: 1 under a pipeline: each stage's update applies its previous step's
// gradients (averaged over the replicas while the next schedule ran), so 2 stages take the steps of
// one process accumulating the micro-batches with the lag, and 2 stages x 2 replicas those of two
// ranks doing so (float64, 1e-10). The lag changes the training (the lag-free run differs).
TEST(PipelineTrain, GradientLagTakesTheStepsOfProcessesAccumulatingWithTheLag) {
  TempDir d;
  const std::string f64 = kSmall +
                          "data.n_train=16 data.n_valid=8 crest.backend=reference "
                          "crest.precision=float64 train.gradient_lag=1 ";
  expect_two_stages_take_one_processs_steps(d, f64);
  const auto ranks = run_crest_mpi(2, f64 + kOneProcess + run_outputs(d, "ranks"));
  ASSERT_EQ(ranks.code, 0) << ranks.out;
  const auto four =
      run_crest_mpi(4, f64 + kPipeline + ", schedule: gpipe}'" + run_outputs(d, "four"));
  ASSERT_EQ(four.code, 0) << four.out;
  EXPECT_NE(four.out.find("dist.pipeline: 2 stages x 2 data-parallel"), std::string::npos)
      << four.out;
  expect_same_run(d, "ranks", "four");
  const auto sync = run_crest_mpi(
      2, kSmall +
             "data.n_train=16 data.n_valid=8 crest.backend=reference crest.precision=float64 " +
             kPipeline + "}'" + run_outputs(d, "sync"));
  ASSERT_EQ(sync.code, 0) << sync.out;
  EXPECT_GT(worst_relative_difference(d.file("two.safetensors"), d.file("sync.safetensors")), 1e-6);
}

// A lag from the second epoch (train.gradient_lag's start_epoch): the pipeline's steps are
// counted per batch, one process's windows per accumulation window; both switch at the same
// update, so 2 stages still take the steps of one process accumulating (float64, 1e-10).
TEST(PipelineTrain, AGradientLagFromTheSecondEpochSwitchesWhereOneProcesssDoes) {
  TempDir d;
  expect_two_stages_take_one_processs_steps(
      d, kSmall +
             "data.n_train=16 data.n_valid=8 crest.backend=reference crest.precision=float64 "
             "data.n_epochs=2 'train.gradient_lag={steps: 1, start_epoch: 1}' ");
}

// The lagged gradient is optimizer state: a checkpoint mid-epoch holds the replicas' average of
// it (settled first), and a run resumed there ends bit for bit where the straight run did.
TEST(PipelineTrain, AResumeMidEpochUnderTheLagIsBitIdentical) {
  expect_mid_epoch_resumes_are_bit_identical(
      4, kSmall + kPipeline + "}' train.gradient_lag=1 data.n_train=24 data.n_valid=8");
}

// The lag's local correction under a pipeline: each replica applies its own fresh gradient in
// place of its stale share of the average, from the first step, and the replicas' stages are
// averaged at every epoch's end, so 2 stages take the steps of one process accumulating the
// micro-batches with the corrected lag (the synchronous run's: nothing to correct on one
// replica), and 2 stages x 2 replicas those of two ranks doing so (float64, 1e-10), which differ
// from the plain lag's.
TEST(PipelineTrain, TheCorrectedLagTakesTheStepsOfProcessesAccumulatingWithIt) {
  TempDir d;
  const std::string f64 = kSmall +
                          "data.n_train=16 data.n_valid=8 data.n_epochs=2 crest.backend=reference "
                          "crest.precision=float64 ";
  const std::string corrected = "'train.gradient_lag={steps: 1, correction: local}' ";
  expect_two_stages_take_one_processs_steps(d, f64 + corrected);
  const auto sync = run_crest_mpi(2, f64 + kPipeline + "}'" + run_outputs(d, "sync"));
  ASSERT_EQ(sync.code, 0) << sync.out;
  expect_same_run(d, "sync", "two");
  const auto ranks = run_crest_mpi(2, f64 + corrected + kOneProcess + run_outputs(d, "ranks"));
  ASSERT_EQ(ranks.code, 0) << ranks.out;
  const auto four = run_crest_mpi(4, f64 + corrected + kPipeline + "}'" + run_outputs(d, "four"));
  ASSERT_EQ(four.code, 0) << four.out;
  EXPECT_NE(four.out.find("with each rank's own gradient in its share's place"), std::string::npos)
      << four.out;
  expect_same_run(d, "ranks", "four");
  const auto plain =
      run_crest_mpi(4, f64 + "train.gradient_lag=1 " + kPipeline + "}'" + run_outputs(d, "plain"));
  ASSERT_EQ(plain.code, 0) << plain.out;
  EXPECT_GT(worst_relative_difference(d.file("four.safetensors"), d.file("plain.safetensors")),
            1e-6);
}

// With the correction a checkpoint mid-epoch holds the replicas' averaged stages (the
// correction restarts there), and a run resumed there ends bit for bit where the straight run did.
TEST(PipelineTrain, AResumeMidEpochUnderTheCorrectedLagIsBitIdentical) {
  expect_mid_epoch_resumes_are_bit_identical(
      4, kSmall + kPipeline +
             "}' 'train.gradient_lag={steps: 1, correction: local}' data.n_train=24 "
             "data.n_valid=8");
}

// An infinity in step 3's gradients of replica 0's second stage (rank 1) under the corrected lag:
// that rank's corrected update would hold it, so it takes the average alone there; step 4's
// average carries it to every replica, and the job stops there, naming it, as two data-parallel
// ranks do (GradientLagMpi).
TEST(PipelineTrain, WithTheCorrectedLagANonFiniteGradientOnOneReplicaStopsAllAtTheNextStep) {
  TempDir d;
  const auto four = test::run_mpirun(
      "-np 4 -x CREST_TEST_GRAD_OVERFLOW_AT_STEP=3@1 " + std::string(CREST_BINARY) + " " + kSmall +
          kPipeline +
          "}' 'train.gradient_lag={steps: 1, correction: local}' data.n_train=48 data.n_valid=8" +
          run_outputs(d, "four"),
      300);
  EXPECT_NE(four.code, 0) << four.out;
  EXPECT_NE(four.out.find("global step 4"), std::string::npos) << four.out;
  EXPECT_EQ(four.out.find("global step 3"), std::string::npos) << four.out;
}

// train.local_sgd under a pipeline: each replica's pipeline updates alone and every H-th update
// (and each epoch's end) averages the replicas' stages, so 2 stages x 2 replicas take the steps of
// 2 ranks accumulating the micro-batches with local SGD (float64, 1e-10): windows of 2 over 3
// steps an epoch (the third averaged at the epoch's end), and post-local SGD after a synchronous
// first epoch. Averaging less often is a different training than averaging gradients.
TEST(PipelineTrain, LocalSgdTakesTheStepsOfTwoRanksAccumulating) {
  TempDir d;
  const std::string f64 = kSmall +
                          "data.n_train=24 data.n_valid=8 data.n_epochs=2 crest.backend=reference "
                          "crest.precision=float64 ";
  for (const std::string local : {"{steps: 2}", "{steps: 2, start_epoch: 1}"}) {
    SCOPED_TRACE(local);
    const std::string name = std::to_string(local.size());
    const std::string sgd = " 'train.local_sgd=" + local + "'";
    const auto ranks = run_crest_mpi(2, f64 + kOneProcess + sgd + run_outputs(d, "ranks" + name));
    ASSERT_EQ(ranks.code, 0) << ranks.out;
    const auto four =
        run_crest_mpi(4, f64 + kPipeline + "}'" + sgd + run_outputs(d, "four" + name));
    ASSERT_EQ(four.code, 0) << four.out;
    expect_same_run(d, "ranks" + name, "four" + name);
  }
  const auto sync = run_crest_mpi(4, f64 + kPipeline + "}'" + run_outputs(d, "sync"));
  ASSERT_EQ(sync.code, 0) << sync.out;
  EXPECT_GT(worst_relative_difference(d.file("four10.safetensors"), d.file("sync.safetensors")),
            1e-6);
}

// Checkpoints fall where the replicas were averaged; a run resumed from one mid-epoch ends bit for
// bit where the straight run did.
TEST(PipelineTrain, AResumeMidEpochUnderLocalSgdIsBitIdentical) {
  expect_mid_epoch_resumes_are_bit_identical(
      4, kSmall + kPipeline + "}' 'train.local_sgd={steps: 2}' data.n_train=24 data.n_valid=8");
}

// S = 2^16 growing every step (2^17, 2^18, ...): the last stage seeds backward with S and every
// stage divides by it, so a float32 run has the bits of the unscaled one, with the lag too.
TEST(PipelineTrain, LossScalingLeavesTheUnscaledRunsBits) {
  TempDir d;
  const std::string run = kSmall + kPipeline + "}' data.n_epochs=2 ";
  for (const std::string lag : {"0", "1"}) {
    SCOPED_TRACE("train.gradient_lag=" + lag);
    test::expect_loss_scaling_leaves_the_bits(d, 2, run + "train.gradient_lag=" + lag, "lag" + lag);
  }
}

// Local SGD over 2 replicas of 2 stages under dynamic loss scaling: every rank's scaler decides on
// the world's facts each step, and a float32 run keeps the unscaled run's bits.
TEST(PipelineTrain, LocalSgdUnderLossScalingLeavesTheUnscaledRunsBits) {
  TempDir d;
  test::expect_loss_scaling_leaves_the_bits(
      d, 4,
      kSmall + kPipeline +
          "}' 'train.local_sgd={steps: 2}' data.n_train=24 data.n_valid=8 data.n_epochs=2",
      "local");
}

// An infinity in the last stage's gradients at step 3 (rank 1 of 2): every stage skips that
// update and halves S, so the run ends where one with the infinity on both stages does, and not
// where one without it does.
TEST(PipelineTrain, AnOverflowOnTheLastStageSkipsTheStepOnEveryStage) {
  TempDir d;
  test::expect_an_overflow_on_rank_1_is_skipped_everywhere(
      d, kSmall + kPipeline + "}' data.n_epochs=2 train.loss_scaling=dynamic ");
}

// The scaler's state is in every checkpoint: resumed mid-epoch with S growing every step, the run
// ends with the straight run's bits and its scale (a scaler reset at the resume would end lower).
TEST(PipelineTrain, AResumeUnderLossScalingKeepsTheScale) {
  TempDir d;
  const std::string args = kSmall + kPipeline +
                           "}' data.n_epochs=2 train.loss_scaling=dynamic "
                           "train.loss_scale_growth_interval=1 'train.checkpoint_every=2 steps' "
                           "train.checkpoint_keep=10";
  const auto straight = run_crest_mpi(2, args + run_outputs(d, "straight"));
  ASSERT_EQ(straight.code, 0) << straight.out;
  const auto kept = list_checkpoints(d.file("straight/checkpoints"));
  ASSERT_EQ(kept.size(), 3u) << straight.out;
  const std::string run = test::run_stopped_at(d, d.file("straight"), kept, 1, "resumed");
  const auto resumed =
      run_crest_mpi(2, "train --resume " + run + " --save-weights " + run + ".safetensors");
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  test::expect_same_tensors(d.file("straight.safetensors"), run + ".safetensors");
  EXPECT_EQ(test::last_loss_scale(resumed.out), test::last_loss_scale(straight.out))
      << straight.out << "\n"
      << resumed.out;
}

// dist.spatial under dist.pipeline (4 ranks: 2 stages, each a group of 2 splitting the samples):
// the run takes the steps of one process accumulating the micro-batches, float64 within 1e-10 —
// both schedules, recomputed, the samples split along depth or width, and with the gradient lag
// (against one process accumulating with the lag) and with its local correction (each group's
// shares averaged before the correction). The second stage's dense head divides its
// weight among its group (the flattened features arrive as blocks), and its checkpoints and
// weights file hold the whole tensors.
TEST(PipelineTrain, StagesSplitSpatiallyTakeTheStepsOfOneProcessAccumulating) {
  TempDir d;
  const std::string f64 = kSmall + "crest.backend=reference crest.precision=float64 ";
  const struct {
    std::string pipeline, spatial, extra;
  } runs[] = {{"}'", "[2,1,1]", ""},
              {", schedule: gpipe, recompute: true}'", "[1,1,2]", ""},
              {"}'", "[2,1,1]", " train.gradient_lag=1"},
              {"}'", "[2,1,1]", " 'train.gradient_lag={steps: 1, correction: local}'"}};
  for (const auto& r : runs) {
    SCOPED_TRACE(r.pipeline + " " + r.spatial + r.extra);
    const std::string at = std::to_string(&r - runs);
    expect_pipeline_takes_its_steps(
        d, "one_" + at, {1, f64 + kOneProcess + r.extra}, "four_" + at,
        {4, f64 + kPipeline + r.pipeline + " dist.spatial=" + r.spatial + r.extra},
        {"2 stages x 1 data-parallel, each stage's samples split among 2 ranks",
         "stage 1 (ranks 2-3, "});
  }
}

// 2 replicas x 2 stages x 2-rank groups on 8 ranks: the replicas read their shards as 2
// data-parallel ranks do, a stage's gradients are averaged over its 4 ranks and the divided dense
// head's parts over the 2 ranks of the same place, so the run takes the steps of 2 ranks
// accumulating (float64, 1e-10).
TEST(PipelineTrain, ReplicasOfSplitStagesTakeTheStepsOfTwoRanksAccumulating) {
  TempDir d;
  const std::string f64 =
      kSmall + "data.n_train=16 data.n_valid=8 crest.backend=reference crest.precision=float64 ";
  // Synchronous, then local SGD (each stage's group averages its gradient shares every step, the
  // replicas' stages their models every 2 batches), then the corrected lag (the group's shares
  // averaged every step, the replicas' average corrected by each replica's own gradient).
  for (const std::string extra : {"", " 'train.local_sgd={steps: 2}'",
                                  " 'train.gradient_lag={steps: 1, correction: local}'"}) {
    SCOPED_TRACE(extra);
    const std::string at = std::to_string(extra.size());
    expect_pipeline_takes_its_steps(
        d, "two" + at, {2, f64 + kOneProcess + extra}, "eight" + at,
        {8, f64 + kPipeline + "}' dist.spatial=[1,2,1]" + extra},
        {"2 stages x 2 data-parallel, each stage's samples split among 2",
         "stage 1 (ranks 2-3, 6-7, ...)"});
  }
  EXPECT_GT(worst_relative_difference(d.file("two0.safetensors"), d.file("two29.safetensors")),
            1e-6);
}

// Its checkpoints gather the stages' parts (the divided dense weight whole) onto rank 0, and a
// resume cuts them again: a run resumed mid-epoch ends bit for bit where the straight run did.
TEST(PipelineTrain, AResumeMidEpochWithSplitStagesIsBitIdentical) {
  expect_mid_epoch_resumes_are_bit_identical(4, kSmall + kPipeline + "}' dist.spatial=[2,1,1]");
}

// DeepCAM (2-D, its skip connections crossing the cut, the per-pixel loss and the IoU on blocks)
// with 2 stages each split [2, 1], float64: one process's steps, validation loss and IoU.
TEST(PipelineTrain, DeepCamWithSplitStagesTrainsAsOneProcess) {
  TempDir d;
  const std::string data = d.file("data");
  ASSERT_EQ(
      run_crest("datagen deepcam --train 8 --valid 2 --height 32 --width 48 --out " + data).code,
      0);
  const std::string args = "train --config " + std::string(CREST_SOURCE_DIR) +
                           "/configs/deepcam-demo.yaml data.data_dir=" + data +
                           " data.sample_shape=[32,48,16] data.n_epochs=1 data.shuffle=false"
                           " model.width_divisor=8 crest.threads=1 crest.backend=reference"
                           " crest.precision=float64 ";
  const auto one = run_crest(args + kOneProcess + run_outputs(d, "one"));
  ASSERT_EQ(one.code, 0) << one.out;
  const auto four =
      run_crest_mpi(4, args + kPipeline + "}' dist.spatial=[2,1]" + run_outputs(d, "four"), 600);
  ASSERT_EQ(four.code, 0) << four.out;
  expect_same_run(d, "one", "four");
  const auto iou = [](const std::string& out) {
    const size_t at = out.find("val_iou ");
    return at == std::string::npos ? std::string() : out.substr(at, 16);
  };
  EXPECT_FALSE(iou(one.out).empty()) << one.out;
  EXPECT_EQ(iou(four.out), iou(one.out)) << four.out;
}

TEST(PipelineTrain, WhatItCannotCombineWithIsRefusedNamingTheKeys) {
  const std::string two = "'dist.pipeline={stages: 2, micro_batches: 2}' ";
  test::expect_refused(
      kSmall + "data.batch_size=4 ", "dist.pipeline",
      {{"'dist.pipeline={stages: 2, micro_batches: 3}'",
        "micro_batches 3 does not divide data.batch_size 4"},
       {"'dist.pipeline={stages: 3, stage_starts: [conv2]}'", "stage_starts names 1 layers for 3"},
       {"'dist.pipeline={stages: 2, schedule: zigzag}'", "expected gpipe or 1f1b"},
       {"'dist.pipeline={stages: 2, depth: 3}'", "unknown key (pipeline accepts"},
       {"'dist.pipeline={stages: 2, balance: luck}'", "expected flops or time, got \"luck\""},
       {"'dist.pipeline={stages: 2, rebalance: 2}'",
        "rebalance: 2 re-cuts a time-balanced cut: it needs balance: time and no stage_starts"},
       {"'dist.pipeline={stages: 2, balance: time, stage_starts: [conv3], rebalance: 1}'",
        "rebalance: 1 re-cuts a time-balanced cut"},
       {"'dist.pipeline={stages: 2, balance: time, rebalance: 17}'", "rebalance"},
       {two + "train.gradient_accumulation_frequency=2",
        "train.gradient_accumulation_frequency 2 (dist.pipeline.micro_batches accumulates"}});
}

TEST(PipelineTrain, StagesThatDoNotFitTheJobAreRefusedNamingTheKey) {
  for (const auto& [ranks, overrides, says] :
       std::vector<std::tuple<int, std::string, std::string>>{
           {1, "'dist.pipeline={stages: 2}'", "dist.pipeline.stages 2 does not divide the 1 ranks"},
           {2, "'dist.pipeline={stages: 2, stage_starts: [nosuch]}'",
            "dist.pipeline.stage_starts: the model has no layer named 'nosuch'"},
           {2, "'dist.pipeline={stages: 2, stage_starts: [conv1]}'", "dist.pipeline.stage_starts"},
           {2, "'dist.pipeline={stages: 2}' dist.spatial=[2,1,1]",
            "dist.spatial: [2, 1, 1] splits each sample among 2 ranks in each of 2 pipeline "
            "stages (dist.pipeline.stages): 4 ranks per replica, which does not divide the job's "
            "2 ranks"}}) {
    SCOPED_TRACE(overrides);
    const auto run = run_crest_mpi(ranks, kSmall + "data.batch_size=4 " + overrides);
    EXPECT_EQ(run.code, 2) << run.out;
    EXPECT_NE(run.out.find(says), std::string::npos) << run.out;
  }
}

}  // namespace
}  // namespace crest
