// crest plan's scaling model (docs/scaling.md) on networks and machines small enough to work out
// by hand: the collectives' formula, the gradient buckets hidden behind backward, the lag, local
// SGD, pipelines, a spatial split's halo, memory and I/O; the machine file and its errors; the
// calibration from benchmark lines; and the facts of a real config.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "crest/core/error.hpp"
#include "crest/plan/calibration.hpp"
#include "crest/plan/machine.hpp"
#include "crest/plan/model_facts.hpp"
#include "crest/plan/scaling_model.hpp"
#include "support/cli_util.hpp"
#include "support/test_util.hpp"

namespace crest {
namespace {

// One node of 4 ranks, each its own device of 1 TFLOP/s; 10 GB/s between them, no latency.
Machine device_node() {
  Machine m;
  m.name = "test";
  m.ranks_per_node = 4;
  m.gflops_per_rank = 1000;
  m.intra_node = {10, 0};
  return m;
}

LayerFacts layer(const std::string& name, double forward, double backward, size_t bytes) {
  LayerFacts l;
  l.name = name;
  l.kind = "conv";
  l.in = l.out = Shape{2, 8, 8, 8};
  l.forward_flops = forward;
  l.backward_flops = backward;
  l.trainable_bytes = bytes;
  return l;
}

// Two layers of 1 GFLOP forward, 2 backward per sample: 2 ms and 4 ms a sample on one rank;
// 8 MB and 2 MB of gradients.
ModelFacts two_layers() {
  ModelFacts f;
  f.model = "two";
  f.backend = "onednn";
  f.precision = "float32";
  f.sample = Shape{8, 8, 8, 2};
  f.sample_bytes = 4'000'000;
  f.layers = {layer("a", 1e9, 2e9, 8'000'000), layer("b", 1e9, 2e9, 2'000'000)};
  f.trainable_bytes = f.parameter_bytes = f.optimizer_state_bytes = 10'000'000;
  f.arena_batch1 = 1'000'000;
  f.arena_batch2 = 2'000'000;
  return f;
}

// Calibrates `m` from a one-rank `crest bench train --profile` of the model "two" at batch 2 on 2
// threads: its step, its update (update_s_min) and each of `layers` at 2 GFLOP forward in
// `forward_ms` (backward twice that).
void calibrate_profile(Machine& m, double step_s, double update_s, double trainable_bytes,
                       const std::vector<std::string>& layers, double forward_ms) {
  std::ostringstream text;
  text << R"({"bench":"train","model":"two","backend":"onednn","precision":"float32",)"
       << R"("threads":2,"batch":2,"ranks":1,"step_s_min":)" << step_s << R"(,"update_s_min":)"
       << update_s << R"(,"trainable_bytes":)" << trainable_bytes << "}\n";
  for (const std::string& name : layers)
    text << R"({"layer":")" << name << R"(","forward_ms":)" << forward_ms << R"(,"backward_ms":)"
         << 2 * forward_ms << R"(,"forward_flop":2e9})"
         << "\n";
  std::istringstream profile(text.str());
  calibrate(m, profile, "bench.jsonl");
}

PlanOptions batch(int64_t global) {
  PlanOptions o;
  o.global_batch = global;
  return o;
}

TEST(Plan, AllreduceIsARingInTheNodeAndATreeAcrossNodes) {
  Machine m = device_node();
  m.nodes = 4;
  m.intra_node = {10, 1};
  m.inter_node = {5, 10};
  EXPECT_EQ(allreduce_seconds(m, 1e8, 1, 4), 0);
  EXPECT_NEAR(allreduce_seconds(m, 1e8, 2, 4), 1e8 / 10e9 + 2e-6, 1e-12);
  // 16 ranks, 4 to a node: 2 (r-1)/r within, 2 (n-1)/n over the injection bandwidth across,
  // 2 (r-1) latencies in the ring and 2 log2(n) in the tree.
  const double expect = 1.5 * 1e8 / 10e9 + 6e-6 + 1.5 * 1e8 / 5e9 + 4 * 10e-6;
  EXPECT_NEAR(allreduce_seconds(m, 1e8, 16, 4), expect, 1e-12);
  // A measured fit replaces the described link within the node.
  m.measured_allreduce = MeasuredAllreduce{2, 5, {20, 0}};
  EXPECT_NEAR(allreduce_seconds(m, 1e8, 2, 4), 1e8 / 20e9, 1e-12);
}

TEST(Plan, BucketsLeaveAsBackwardFinishesThem) {
  // Global batch 4 on 2 ranks: forward 4 ms, backward 8 ms. Backward finishes b (2 MB) at 4 ms:
  // that bucket (past the 1 MB first bucket) leaves then, 0.2 ms; a's 8 MB leave at 8 ms and take
  // 0.8 ms, so 0.8 ms of the 1.0 ms stay exposed.
  const Prediction p = predict(two_layers(), device_node(), {.ranks = 2}, batch(4));
  EXPECT_EQ(p.batch_per_replica, 2);
  EXPECT_NEAR(p.compute_s, 12e-3, 1e-12);
  EXPECT_NEAR(p.gradient_exchange_s, 1.0e-3, 1e-12);
  EXPECT_NEAR(p.exposed_exchange_s, 0.8e-3, 1e-12);
  EXPECT_NEAR(p.hidden_fraction(), 0.2, 1e-9);
  EXPECT_NEAR(p.step_s, 12.8e-3, 1e-12);
  EXPECT_NEAR(p.samples_per_s, 4 / 12.8e-3, 1e-6);
  EXPECT_NEAR(p.efficiency, 12.0 / 12.8, 1e-9);  // one rank with batch 2 takes 12 ms
  // Parameters, gradients, momentum and the arena at batch 2.
  EXPECT_NEAR(p.memory_bytes, 10e6 + 20e6 + 2e6, 1);
  EXPECT_EQ(p.overrides(), std::vector<std::string>{"data.batch_size=2"});
}

TEST(Plan, TheLagHidesTheExchangeBehindTheNextStep) {
  const Prediction p =
      predict(two_layers(), device_node(), {.ranks = 2, .gradient_lag = true}, batch(4));
  EXPECT_NEAR(p.exposed_exchange_s, 0, 1e-15);
  EXPECT_NEAR(p.step_s, 12e-3, 1e-12);
  // On a link 100 times slower the exchange (100 ms) outlasts the step: 88 ms stay exposed.
  Machine slow = device_node();
  slow.intra_node.gb_s = 0.1;
  const Prediction q = predict(two_layers(), slow, {.ranks = 2, .gradient_lag = true}, batch(4));
  EXPECT_NEAR(q.exposed_exchange_s, 100e-3 - 12e-3, 1e-9);
  EXPECT_EQ(q.overrides(), (std::vector<std::string>{"data.batch_size=2", "train.gradient_lag=1"}));
  // Its memory: the data-parallel run's and the lag's two gradient copies.
  ModelFacts f = two_layers();
  f.gradient_lag_bytes = 2 * f.trainable_bytes;
  EXPECT_NEAR(predict(f, slow, {.ranks = 2, .gradient_lag = true}, batch(4)).memory_bytes -
                  predict(f, slow, {.ranks = 2}, batch(4)).memory_bytes,
              2.0 * static_cast<double>(f.trainable_bytes), 1.0);
}

// docs/convergence.md: momentum SGD with a one-step-old gradient is stable only for steps
// lr·h < 1 − m, against 2 (1 + m) synchronously; Adam's first moment is a momentum too, and
// the lag slowed it; so did LAMB's on CosmoFlow (not on DeepCAM).
TEST(Plan, TheLagUnderMomentumSgdIsCautionedAndNeverRecommended) {
  OptimizerConfig sgd;
  sgd.momentum = 0.9;
  EXPECT_EQ(lag_caution(sgd),
            "the lag under SGD momentum 0.9: stable only for lr·h < 0.1, 38x below synchronous; "
            "train.gradient_lag.correction: local trained CosmoFlow's fixture within 7 % of "
            "synchronous training (docs/convergence.md)");
  OptimizerConfig nesterov = sgd, lars = sgd, larc_over_sgd = sgd, larc_over_adam, adam, lamb,
                  plain;
  nesterov.nesterov = true;
  EXPECT_NE(lag_caution(nesterov).find("(Nesterov)"), std::string::npos);
  EXPECT_NE(lag_caution(nesterov).find("correction: local"), std::string::npos);
  lars.name = "LARS";
  larc_over_sgd.name = "LARC";
  EXPECT_NE(lag_caution(lars).find("LARS momentum 0.9"), std::string::npos);
  EXPECT_NE(lag_caution(larc_over_sgd).find("LARC momentum 0.9"), std::string::npos);
  larc_over_adam.name = "LARC";
  larc_over_adam.larc_base = "Adam";
  adam.name = "AdamW";
  EXPECT_EQ(lag_caution(adam),
            "the lag under AdamW (beta1 0.9): CosmoFlow's fixture missed in 20 epochs the "
            "target synchronous training reached in 7; train.gradient_lag.correction: local "
            "trained CosmoFlow's fixture within 7 % of synchronous training "
            "(docs/convergence.md)");
  EXPECT_NE(lag_caution(larc_over_adam).find("LARC (beta1 0.9)"), std::string::npos);
  lamb.name = "LAMB";
  EXPECT_EQ(lag_caution(lamb),
            "the lag under LAMB (beta1 0.9): DeepCAM's fixture trained as fast as synchronously, "
            "CosmoFlow's missed in 20 epochs the target synchronous training reached in 9-11 "
            "(docs/convergence.md)");
  EXPECT_EQ(lag_caution(plain), "");  // SGD, momentum 0

  // The lag's candidates carry the note; 20 % faster, they still leave the recommendation to
  // synchronous data parallelism.
  ModelFacts f = two_layers();
  f.lag_caution = lag_caution(sgd);
  Machine slow = device_node();
  slow.intra_node.gb_s = 0.1;
  Prediction lagged = predict(f, slow, {.ranks = 2, .gradient_lag = true}, batch(4));
  const Prediction data = predict(f, slow, {.ranks = 2}, batch(4));
  EXPECT_TRUE(lagged.cautioned);
  EXPECT_EQ(lagged.notes.back(), f.lag_caution);
  EXPECT_FALSE(data.cautioned);
  lagged.samples_per_s = 1.2 * data.samples_per_s;
  const std::vector<Prediction> ranked = rank_predictions({lagged, data});
  EXPECT_EQ(ranked[recommended_index(ranked)].d.name(), "data");
}

// The lag with its local correction: the plain lag's exchange and memory plus one gradient copy,
// its pass priced as a third of an update; under momentum SGD it carries no caution (the ranks'
// mean takes the synchronous update), so where the exchange is exposed it is recommended over
// synchronous data parallelism; under LAMB it is cautioned, and LARS and LARC are unmeasured.
TEST(Plan, TheCorrectedLagIsPricedAndRecommendedUnderMomentumSgd) {
  OptimizerConfig sgd;
  sgd.momentum = 0.9;
  ModelFacts f = two_layers();
  f.gradient_lag_bytes = 2 * f.trainable_bytes;
  f.lag_caution = lag_caution(sgd);
  f.corrected_lag_caution = corrected_lag_caution(sgd);
  EXPECT_EQ(f.corrected_lag_caution, "");
  Machine slow = device_node();
  slow.intra_node.gb_s = 0.1;
  // The update measured (2 ms for the model's 10 MB): the correction is priced from it.
  calibrate_profile(slow, 0.014, 0.002, 10e6, {"a", "b"}, 4);
  const Decomposition corrected_lag{.ranks = 2, .gradient_lag = true, .lag_correction = true};
  const Prediction plain = predict(f, slow, {.ranks = 2, .gradient_lag = true}, batch(4));
  const Prediction corrected = predict(f, slow, corrected_lag, batch(4));
  const Prediction data = predict(f, slow, {.ranks = 2}, batch(4));
  EXPECT_EQ(corrected.d.name(), "data + corrected lag");
  EXPECT_EQ(corrected.overrides(),
            (std::vector<std::string>{"data.batch_size=2",
                                      "train.gradient_lag={steps: 1, correction: local}"}));
  EXPECT_NEAR(corrected.memory_bytes - plain.memory_bytes, static_cast<double>(f.trainable_bytes),
              1.0);
  EXPECT_NEAR(corrected.compute_s - plain.compute_s, plain.update_s / 3, 1e-12);
  EXPECT_GT(plain.update_s, 0);
  EXPECT_TRUE(plain.cautioned);
  EXPECT_FALSE(corrected.cautioned);
  EXPECT_GT(data.exposed_exchange_s, corrected.exposed_exchange_s);
  const std::vector<Prediction> ranked = rank_predictions({plain, corrected, data});
  EXPECT_EQ(ranked[recommended_index(ranked)].d.name(), "data + corrected lag");

  OptimizerConfig lamb, lars, larc_over_lamb, adam;
  lamb.name = "LAMB";
  lars.name = "LARS";
  larc_over_lamb.name = "LARC";
  larc_over_lamb.larc_base = "LAMB";
  adam.name = "Adam";
  EXPECT_NE(corrected_lag_caution(lamb).find("worse than with the plain lag"), std::string::npos);
  EXPECT_NE(corrected_lag_caution(larc_over_lamb).find("under LAMB"), std::string::npos);
  EXPECT_NE(corrected_lag_caution(lars).find("not measured"), std::string::npos);
  EXPECT_EQ(corrected_lag_caution(adam), "");
  f.corrected_lag_caution = corrected_lag_caution(lamb);
  const Prediction under_lamb = predict(f, slow, corrected_lag, batch(4));
  EXPECT_TRUE(under_lamb.cautioned);
  EXPECT_EQ(under_lamb.notes.back(), f.corrected_lag_caution);
}

TEST(Plan, LocalSgdAveragesWeightsAndStateOnceAWindow) {
  // Weights and momentum, 20 MB: 2 ms per averaging, every 4 steps.
  const Prediction p =
      predict(two_layers(), device_node(), {.ranks = 2, .local_sgd_steps = 4}, batch(4));
  EXPECT_NEAR(p.gradient_exchange_s, 0.5e-3, 1e-12);
  EXPECT_NEAR(p.step_s, 12.5e-3, 1e-12);
  EXPECT_EQ(p.overrides().back(), "train.local_sgd={steps: 4}");
}

// The expected largest of n standard normal draws, against the exact values (Blom's
// approximation is within a few percent, closer as n grows).
TEST(Plan, TheSlowestOfNRanksLagsByTheExpectedLargestNormalDraw) {
  EXPECT_EQ(expected_max_of_normals(1), 0);
  EXPECT_NEAR(expected_max_of_normals(2), 0.5642, 0.05 * 0.5642);
  EXPECT_NEAR(expected_max_of_normals(10), 1.5388, 0.02 * 1.5388);
  EXPECT_NEAR(expected_max_of_normals(1000), 3.2414, 0.01 * 3.2414);
  for (int n = 2; n < 100000; n *= 3)
    EXPECT_LT(expected_max_of_normals(n), expected_max_of_normals(3 * n)) << n;
}

// With compute.step_jitter a synchronous step waits for the slowest of its ranks: jitter x compute
// x the expected largest draw of that many; the lag's slack of one step averages two steps'
// draws (1/sqrt 2 of it), local SGD's window of H steps H's (1/sqrt H); one rank waits for none.
TEST(Plan, StragglersSlowTheStepAndSlackHidesSomeOfIt) {
  Machine m = device_node();
  m.step_jitter = 0.02;
  const Prediction plain = predict(two_layers(), m, {.ranks = 4}, batch(8));
  const double late = 0.02 * plain.compute_s * expected_max_of_normals(4);
  EXPECT_NEAR(plain.straggler_s, late, 1e-15);
  EXPECT_NEAR(plain.step_s - plain.straggler_s,
              predict(two_layers(), device_node(), {.ranks = 4}, batch(8)).step_s, 1e-15);
  EXPECT_NEAR(predict(two_layers(), m, {.ranks = 4, .gradient_lag = true}, batch(8)).straggler_s,
              late / std::sqrt(2.0), 1e-15);
  EXPECT_NEAR(predict(two_layers(), m, {.ranks = 4, .local_sgd_steps = 4}, batch(8)).straggler_s,
              late / 2, 1e-15);
  EXPECT_EQ(predict(two_layers(), m, {.ranks = 1}, batch(8)).straggler_s, 0);
}

TEST(Plan, PipelineStepIsTheSlowestStageOverMPlusKMinusOneSlots) {
  // 2 stages x 2 micro-batches of 2 samples: 3 slots of the slowest stage (3 ms a sample), and
  // one activation (1024 floats a sample) sent each way per slot.
  const Prediction p = predict(two_layers(), device_node(),
                               {.ranks = 2, .pipeline_stages = 2, .micro_batches = 2}, batch(4));
  EXPECT_EQ(p.batch_per_replica, 4);
  EXPECT_NEAR(p.bubble_fraction, 1.0 / 3, 1e-12);
  EXPECT_NEAR(p.compute_s, 3 * 3e-3 * 2, 1e-12);
  EXPECT_NEAR(p.pipeline_s, 3 * 2 * (4096.0 * 2 / 10e9), 1e-15);
  EXPECT_TRUE(p.runnable);              // crest train runs dist.pipeline
  EXPECT_EQ(p.gradient_exchange_s, 0);  // one replica
  // Its memory: the larger stage's (a: 8 MB) parameters, gradients, state and, with M > 1, the
  // micro-batches' gradient sum; the activations of M = 2 in flight at batch 2 are those of one
  // at batch 4 (the arena grows linearly here).
  const Prediction one = predict(two_layers(), device_node(),
                                 {.ranks = 2, .pipeline_stages = 2, .micro_batches = 1}, batch(4));
  EXPECT_NEAR(p.memory_bytes - one.memory_bytes, 8e6, 1);
}

TEST(Plan, PipelineStagesInTheBubbleLeaveTheirCoresToTheBusyOnes) {
  // Four layers of 3 GFLOP a sample on 4 stages x 4 micro-batches of 1 sample, at 1 TFLOP/s per
  // core: a stage takes 3 ms a sample on a core of its own.
  ModelFacts f = two_layers();
  f.layers = {layer("a", 1e9, 2e9, 1000), layer("b", 1e9, 2e9, 1000), layer("c", 1e9, 2e9, 1000),
              layer("d", 1e9, 2e9, 1000)};
  Machine cpu = device_node();
  cpu.gflops_per_rank = 0;
  cpu.gflops_per_core = 1000;
  cpu.cores_per_node = 2;
  const Decomposition d{.ranks = 4, .pipeline_stages = 4, .micro_batches = 4};
  // 7 slots with 1, 2, 3, 4, 3, 2, 1 stages busy share the 2 cores: a core each up to 2 busy,
  // 2/3 of one for 3, half for 4 — 1 + 1 + 1.5 + 2 + 1.5 + 1 + 1 = 9 stage-times, where 4 ranks
  // on 2 cores all along would take 7 x 2.
  EXPECT_NEAR(predict(f, cpu, d, batch(4)).compute_s, 9 * 3e-3, 1e-12);
  // A device per rank: every slot at the device's rate.
  Machine devices = device_node();
  devices.gflops_per_rank = 1000;
  EXPECT_NEAR(predict(f, devices, d, batch(4)).compute_s, 7 * 3e-3, 1e-12);
}

TEST(Plan, SpatialSplitHalvesTheLayerAndExchangesOneRowEachWay) {
  ModelFacts f = two_layers();
  f.layers.resize(1);
  WindowAxis w;
  w.in_extent = w.out_extent = 8;
  w.kernel = 3;
  w.pad_lo = 1;
  f.layers[0].windows = {w, w, w};
  LayerFacts loss;
  loss.name = "loss";
  loss.kind = "mse_loss";
  loss.in = Shape{2, 8, 8, 8};
  loss.out = Shape{};
  f.layers.push_back(loss);
  f.trainable_bytes = f.parameter_bytes = f.optimizer_state_bytes = 8'000'000;
  const Prediction p = predict(f, device_node(), {.ranks = 2, .spatial = {2, 1, 1}}, batch(2));
  EXPECT_EQ(p.batch_per_replica, 2);
  EXPECT_NEAR(p.compute_s, 0.5 * 2 * 3e-3, 1e-12);  // half of each sample's rows
  // One row of 2 x 8 x 8 floats forward and twice backward, and the output gathered (half of it
  // arrives) for the loss, for each of 2 samples.
  EXPECT_NEAR(p.halo_s, (3 * 128 * 4 + 4096.0 / 2) * 2 / 10e9, 1e-15);
  EXPECT_EQ(p.overrides(), (std::vector<std::string>{"data.batch_size=2", "dist.spatial=[2,1,1]"}));
  // Eight parts of 8 rows with a 5-wide window dilated 3: the samples cannot be split so.
  f.layers[0].windows[0].kernel = 5;
  f.layers[0].windows[0].dilation = 3;
  f.layers[0].windows[0].pad_lo = 6;
  try {
    predict(f, device_node(), {.ranks = 8, .spatial = {8, 1, 1}}, batch(1));
    FAIL() << "the split was not refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dist.spatial"), std::string::npos) << e.what();
  }
}

TEST(Plan, ReadingLimitsTheStepWhenTheFileSystemIsSlow) {
  Machine m = device_node();
  m.shared_fs_gb_s = 0.001;  // 1 MB/s for 4 samples of 4 MB
  const Prediction p = predict(two_layers(), m, {.ranks = 2}, batch(4));
  EXPECT_NEAR(p.io_s, 16.0, 1e-9);
  EXPECT_NEAR(p.step_s, 16.0, 1e-9);
  ASSERT_FALSE(p.notes.empty());
  EXPECT_NE(p.notes.back().find("reading limits the step"), std::string::npos);
}

TEST(Plan, AModelTooLargeForTheRankIsRankedLast) {
  Machine m = device_node();
  m.memory_gb_per_rank = 0.001;  // 1 MB
  std::vector<Prediction> p{
      predict(two_layers(), m, {.ranks = 2}, batch(4)),
      predict(two_layers(), device_node(), {.ranks = 2, .local_sgd_steps = 4}, batch(4))};
  EXPECT_FALSE(p[0].fits);
  const std::vector<Prediction> ranked = rank_predictions(p);
  EXPECT_EQ(ranked.front().d.local_sgd_steps, 4);
}

TEST(Plan, TheRecommendationChangesTrainingLeastWithinFivePercent) {
  const auto with = [](const Decomposition& d, double samples_per_s, bool fits = true) {
    Prediction p;
    p.d = d;
    p.samples_per_s = samples_per_s;
    p.fits = fits;
    return p;
  };
  const Decomposition data{.ranks = 4}, lag{.ranks = 4, .gradient_lag = true},
      local{.ranks = 4, .local_sgd_steps = 4}, split{.ranks = 4, .spatial = {2, 1, 1}};
  // The lag 3 % faster: within the model's error, and it changes the updates; data is taken.
  auto ranked = rank_predictions({with(lag, 103), with(data, 100), with(local, 104)});
  EXPECT_EQ(ranked[recommended_index(ranked)].d.name(), "data");
  // A split is the same arithmetic but more machinery: it wins when it is clearly faster.
  ranked = rank_predictions({with(split, 101), with(data, 100)});
  EXPECT_EQ(ranked[recommended_index(ranked)].d.name(), "data");
  ranked = rank_predictions({with(split, 110), with(data, 100), with(lag, 111)});
  EXPECT_EQ(ranked[recommended_index(ranked)].d.spatial_ranks(), 2);
  // The lag 20 % faster than data is worth its change.
  ranked = rank_predictions({with(lag, 120), with(data, 100), with(local, 121)});
  EXPECT_TRUE(ranked[recommended_index(ranked)].d.gradient_lag);
  // What does not fit is never recommended; nothing fits: no recommendation.
  ranked = rank_predictions({with(data, 200, false), with(lag, 100)});
  EXPECT_TRUE(ranked[recommended_index(ranked)].d.gradient_lag);
  ranked = rank_predictions({with(data, 200, false)});
  EXPECT_EQ(recommended_index(ranked), ranked.size());
}

TEST(Plan, CandidatesHoldTheGlobalBatch) {
  const ModelFacts f = two_layers();
  // 4 ranks, global batch 4: data, lag, corrected lag, local SGD; 2-way splits (3 axes) x 2
  // data; 4-way splits (6 ways over 3 axes); two layers are too few for pipeline stages.
  EXPECT_EQ(candidate_decompositions(f, 4, batch(4)).size(), 13u);
  // Under dynamic loss scaling local SGD stays a candidate; each of its steps also sums two
  // overflow flags, so it costs a little more than without.
  PlanOptions scaled = batch(4);
  scaled.dynamic_loss_scaling = true;
  const std::vector<Decomposition> with_scaling = candidate_decompositions(f, 4, scaled);
  EXPECT_EQ(with_scaling.size(), 13u);
  const Decomposition local{.ranks = 4, .local_sgd_steps = 4};
  EXPECT_GT(predict(f, device_node(), local, scaled).step_s,
            predict(f, device_node(), local, batch(4)).step_s);
  // A global batch of 2 cannot be shared by 4 replicas: only the splits that leave 2 or 1.
  for (const Decomposition& d : candidate_decompositions(f, 4, batch(2)))
    EXPECT_GT(d.spatial_ranks(), 1) << d.name();
  EXPECT_THROW(predict(f, device_node(), {.ranks = 4}, batch(2)), Error);
}

// Pipelines (at least two layers a stage): K stages x M micro-batches for M = K, 2K, 4K where
// they divide a replica's batch, each also with the lag, plain and corrected, where there are
// replicas to average over, and under dynamic loss scaling too. The lag hides at most the
// schedule's length; the correction adds a gradient copy and a third of the stage's update.
TEST(Plan, PipelineCandidatesTakeTheLagAndLossScaling) {
  ModelFacts f = two_layers();
  f.layers = {layer("a", 1e9, 2e9, 8'000'000), layer("b", 1e9, 2e9, 2'000'000),
              layer("c", 1e9, 2e9, 2'000'000), layer("d", 1e9, 2e9, 2'000'000)};
  PlanOptions o = batch(8);
  o.dynamic_loss_scaling = true;
  std::vector<std::string> pipelines;
  for (const Decomposition& d : candidate_decompositions(f, 4, o))
    if (d.pipeline_stages > 1) pipelines.push_back(d.name());
  // 2 stages x 2 replicas (4 samples each: M = 2, 4) with and without the lags; 2 stages each
  // split among 2 ranks (one replica of 8 samples: M = 8) along each axis; 4 layers are too few
  // for 4 stages.
  EXPECT_EQ(pipelines, (std::vector<std::string>{
                           "pipeline 2 stages x 2 micro x 2 data",
                           "pipeline 2 stages x 2 micro x 2 data + lag",
                           "pipeline 2 stages x 2 micro x 2 data + corrected lag",
                           "pipeline 2 stages x 4 micro x 2 data",
                           "pipeline 2 stages x 4 micro x 2 data + lag",
                           "pipeline 2 stages x 4 micro x 2 data + corrected lag",
                           "pipeline 2 stages x 8 micro, spatial [1, 1, 2]",
                           "pipeline 2 stages x 8 micro, spatial [1, 2, 1]",
                           "pipeline 2 stages x 8 micro, spatial [2, 1, 1]",
                       }));
  const std::vector<LayerFacts> four = f.layers;
  f.layers.insert(f.layers.end(), four.begin(), four.end());  // 8 layers: 4 stages, one replica
  int four_stages = 0;
  for (const Decomposition& d : candidate_decompositions(f, 4, o)) {
    if (d.pipeline_stages != 4) continue;
    ++four_stages;
    EXPECT_FALSE(d.gradient_lag) << "one replica: nothing to average";
  }
  EXPECT_EQ(four_stages, 2);  // M = 4, 8
  Machine slow = device_node();
  slow.intra_node = {0.001, 1};  // an exchange far longer than the schedule
  const Decomposition pipe{.ranks = 4, .pipeline_stages = 2, .micro_batches = 2};
  Decomposition lagged = pipe;
  lagged.gradient_lag = true;
  const Prediction plain = predict(f, slow, pipe, batch(8));
  const Prediction lag = predict(f, slow, lagged, batch(8));
  EXPECT_GT(plain.exposed_exchange_s, 0);
  EXPECT_NEAR(lag.exposed_exchange_s, plain.exposed_exchange_s - plain.compute_s,
              1e-9 * plain.exposed_exchange_s);
  // The lag's two gradient copies of the larger stage's gradients (the 8 equal-time layers cut
  // 4 | 4: 8 + 2 + 2 + 2 MB each); no rank holds the whole model's.
  f.gradient_lag_bytes = 2 * f.trainable_bytes;
  EXPECT_NEAR(predict(f, slow, lagged, batch(8)).memory_bytes - plain.memory_bytes, 2 * 14e6, 1.0);
  EXPECT_EQ(lag.overrides(),
            (std::vector<std::string>{"data.batch_size=4", "train.gradient_lag=1",
                                      "dist.pipeline.stages=2", "dist.pipeline.micro_batches=2"}));
  // The update measured (2 ms for the model's 14 MB): the correction is priced from it.
  calibrate_profile(slow, 0.05, 0.002, 14e6, {"a", "b", "c", "d"}, 2);
  Decomposition corrected_lag = lagged;
  corrected_lag.lag_correction = true;
  const Prediction corrected = predict(f, slow, corrected_lag, batch(8));
  const Prediction lag_again = predict(f, slow, lagged, batch(8));
  EXPECT_NEAR(corrected.memory_bytes - lag_again.memory_bytes, 14e6, 1.0);
  EXPECT_GT(lag_again.update_s, 0);
  EXPECT_NEAR(corrected.compute_s - lag_again.compute_s, lag_again.update_s / 3,
              1e-12 * lag_again.compute_s);
  EXPECT_EQ(corrected.overrides(),
            (std::vector<std::string>{"data.batch_size=4",
                                      "train.gradient_lag={steps: 1, correction: local}",
                                      "dist.pipeline.stages=2", "dist.pipeline.micro_batches=2"}));
}

// Stages split spatially: each stage's group of 2 shares every layer's work (half the depth each),
// so the schedule's compute halves against the same pipeline unsplit with the same batch; its
// gradients are averaged over the group; the overrides set both keys.
TEST(Plan, PipelineStagesSplitSpatiallyShareTheWork) {
  ModelFacts f = two_layers();
  f.layers = {layer("a", 1e9, 2e9, 8'000'000), layer("b", 1e9, 2e9, 2'000'000),
              layer("c", 1e9, 2e9, 2'000'000), layer("d", 1e9, 2e9, 2'000'000)};
  const Decomposition plain{.ranks = 2, .pipeline_stages = 2, .micro_batches = 8};
  const Decomposition split{
      .ranks = 4, .spatial = {2, 1, 1}, .pipeline_stages = 2, .micro_batches = 8};
  const Prediction a = predict(f, device_node(), plain, batch(8));
  const Prediction b = predict(f, device_node(), split, batch(8));
  EXPECT_NEAR(b.compute_s - b.update_s, (a.compute_s - a.update_s) / 2, 1e-9 * a.compute_s);
  EXPECT_EQ(a.gradient_exchange_s, 0);  // one rank per stage: nothing to average
  EXPECT_GT(b.gradient_exchange_s, 0);  // the group's shares of each stage's gradients
  EXPECT_DOUBLE_EQ(b.bubble_fraction, a.bubble_fraction);
  EXPECT_LT(b.memory_bytes, a.memory_bytes);  // each rank holds blocks of the activations
  EXPECT_EQ(b.overrides(),
            (std::vector<std::string>{"data.batch_size=8", "dist.spatial=[2,1,1]",
                                      "dist.pipeline.stages=2", "dist.pipeline.micro_batches=8"}));
}

// The machine file: read, refused with file, line and key, and its measurements kept beside it.
TEST(PlanMachine, ReadsAMachineAndRefusesWrongValuesByKey) {
  test::TempDir d;
  const auto write = [&](const std::string& text) {
    std::ofstream(d.file("m.yaml")) << text;
    return d.file("m.yaml");
  };
  const std::string good =
      "name: n\nnodes: 2\nranks_per_node: 4\ncores_per_node: 8\n"
      "compute: {gflops_per_core: 50, step_jitter: 0.03}\n"
      "network:\n  intra_node: {gb_s: 10, latency_us: 2}\n  inter_node: {gb_s: 12.5}\n"
      "storage: {shared_fs_gb_s: 100}\n";
  const Machine m = load_machine(write(good));
  EXPECT_EQ(m.nodes, 2);
  EXPECT_EQ(m.cores_per_node, 8);
  EXPECT_EQ(m.gflops_per_core, 50);
  EXPECT_EQ(m.step_jitter, 0.03);
  EXPECT_EQ(load_machine(write(machine_yaml(m))).step_jitter, 0.03);
  EXPECT_EQ(m.inter_node.gb_s, 12.5);
  EXPECT_EQ(m.shared_fs_gb_s, 100);
  const auto refused = [&](const std::string& text, const std::string& what) {
    try {
      load_machine(write(text));
      ADD_FAILURE() << "accepted: " << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), 2);
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("m.yaml"), std::string::npos) << e.what();
    }
  };
  refused(good + "gpus: 6\n", "m.yaml:10: gpus: unknown key");
  refused("name: n\nnetwork: {intra_node: {gb_s: 1}}\n", "ranks_per_node: missing");
  refused("name: n\nranks_per_node: 2\nnetwork: {intra_node: {gb_s: -1}}\n",
          "network.intra_node.gb_s: must be between");
  refused("name: n\nranks_per_node: 2\nnodes: 2\nnetwork: {intra_node: {gb_s: 1}}\n",
          "network.inter_node: missing");
  refused(
      "name: n\nranks_per_node: 2\ncompute: {gflops_per_core: 5}\nnetwork: {intra_node: "
      "{gb_s: 1}}\n",
      "needs cores_per_node");
  refused(
      "name: n\nranks_per_node: 2\ncompute: {step_jitter: 1.5}\nnetwork: {intra_node: "
      "{gb_s: 1}}\n",
      "compute.step_jitter: must be between");
  refused("name: n\nranks_per_node: [2\n", "m.yaml:");
}

TEST(PlanMachine, MeasurementsRoundTripBesideTheDescription) {
  test::TempDir d;
  std::ofstream(d.file("m.yaml"))
      << "name: n\nranks_per_node: 2\nnetwork: {intra_node: {gb_s: 1}}\n";
  Machine m = load_machine(d.file("m.yaml"));
  EXPECT_EQ(measured_path(m.file), d.file("m.measured.yaml"));
  m.measured_allreduce = MeasuredAllreduce{2, 5, {3.25, 7.5}};
  MeasuredTraining t;
  t.model = "cosmoflow";
  t.backend = "onednn";
  t.precision = "float32";
  t.threads = 2;
  t.node_ranks = 3;
  t.batch = 4;
  t.step_s = 0.1 / 3;
  t.update_s = 0.002;
  t.trainable_bytes = 123456;
  t.layers = {{"conv1", 0.011, 0.022, 1.5e9}};
  m.measured_training = {t};
  m.measured_loader = {{"deepcam-hdf5", {768, 1152, 16}, 4, 12.5 / 3, 56623104}};
  save_measured(m);
  const Machine back = load_machine(d.file("m.yaml"));
  ASSERT_EQ(back.measured_loader.size(), 1u);
  EXPECT_EQ(back.measured_loader[0].sample_shape, (std::vector<int64_t>{768, 1152, 16}));
  EXPECT_EQ(back.measured_loader[0].samples_per_s, 12.5 / 3);
  ASSERT_TRUE(back.measured_allreduce);
  EXPECT_EQ(back.measured_allreduce->link.gb_s, 3.25);
  ASSERT_EQ(back.measured_training.size(), 1u);
  EXPECT_EQ(back.measured_training[0].step_s, 0.1 / 3);  // every digit kept
  EXPECT_EQ(back.measured_training[0].node_ranks, 3);
  EXPECT_EQ(back.measured_training[0].layers[0].forward_flops, 1.5e9);
  EXPECT_EQ(measured_yaml(back), measured_yaml(m));
}

// Benchmark lines in, measurements out.
TEST(PlanCalibration, FoldsProfilesAndFitsTheAllreduce) {
  Machine m = device_node();
  std::ostringstream lines;
  lines << std::setprecision(17);
  // A profile whose layers add up to twice the best step less the update: kept in proportion.
  lines << R"({"bench":"train","model":"two","backend":"onednn","precision":"float32","threads":2,)"
        << R"("batch":2,"ranks":1,"step_s_min":0.013,"update_s_min":0.001,"trainable_bytes":10})"
        << "\n"
        << R"({"layer":"a","forward_ms":4,"backward_ms":8,"forward_flop":2e9})"
        << "\n"
        << R"({"layer":"b","forward_ms":4,"backward_ms":8,"forward_flop":2e9})"
        << "\n";
  // Exact ring times on 2 ranks for 5 us and 2 GB/s: 2 * 5 us + bytes / 2 GB/s.
  for (double bytes : {4096.0, 1048576.0, 33554432.0})
    lines << R"({"bench":"allreduce","ranks":2,"bytes":)" << bytes << R"(,"time_us":)"
          << (10e-6 + bytes / 2e9) * 1e6 << "}\n";
  lines << R"({"bench":"peak","gflops":100})"
        << "\n";
  std::istringstream in(lines.str());
  const CalibrationSummary s = calibrate(m, in, "bench.jsonl");
  EXPECT_EQ(s.trainings, 1);
  EXPECT_EQ(s.allreduce_fits, 1);
  EXPECT_EQ(s.ignored_lines, 1);
  ASSERT_EQ(m.measured_training.size(), 1u);
  const MeasuredTraining& t = m.measured_training[0];
  ASSERT_EQ(t.layers.size(), 2u);
  EXPECT_NEAR(t.layers[0].forward_s, 0.002 * 0.5, 1e-12);  // per sample, scaled to the best step
  EXPECT_NEAR(t.layers[0].backward_s, 0.004 * 0.5, 1e-12);
  EXPECT_NEAR(t.layers[0].forward_flops, 1e9, 1e-3);
  ASSERT_TRUE(m.measured_allreduce);
  EXPECT_NEAR(m.measured_allreduce->link.gb_s, 2, 1e-9);
  EXPECT_NEAR(m.measured_allreduce->link.latency_us, 5, 1e-6);
  // The profile now gives the layers' times: two layers at 3 ms a sample, batch 2 per rank.
  const Prediction p = predict(two_layers(), m, {.ranks = 1}, batch(2));
  EXPECT_EQ(p.source, ComputeSource::measured);
  EXPECT_NEAR(p.compute_s, 2 * 2 * 3e-3 + p.update_s, 1e-12);
  EXPECT_GT(p.update_s, 0);
  // The same run again, slower: the faster measurement stays; faster: it replaces it.
  for (const double step : {0.026, 0.0075}) {
    std::string text = lines.str();
    text.replace(text.find("0.013"), 5, std::to_string(step).substr(0, 6));
    std::istringstream again(text);
    calibrate(m, again, "bench.jsonl");
    ASSERT_EQ(m.measured_training.size(), 1u);
    EXPECT_EQ(m.measured_training[0].step_s, std::min(step, 0.013));
  }
}

// Host (MPI) and device-memory (NCCL) allreduce lines in one input are never fitted together: a
// node of devices fits the device lines, a CPU node the host lines, and either fits the other
// kind where its own is missing.
TEST(PlanCalibration, AllreduceLinesOfTheMachinesMemoryAreFittedAlone) {
  // Exact ring times on 2 ranks: host 5 us and 2 GB/s, device 20 us and 100 GB/s.
  const auto lines = [](bool host, bool device) {
    std::ostringstream out;
    out << std::setprecision(17);
    for (double bytes : {4096.0, 1048576.0, 33554432.0}) {
      if (host)
        out << R"({"bench":"allreduce","ranks":2,"memory":"host","bytes":)" << bytes
            << R"(,"time_us":)" << (10e-6 + bytes / 2e9) * 1e6 << "}\n";
      if (device)
        out << R"({"bench":"allreduce","ranks":2,"memory":"cuda","bytes":)" << bytes
            << R"(,"time_us":)" << (40e-6 + bytes / 100e9) * 1e6 << "}\n";
    }
    return out.str();
  };
  Machine cpu = device_node();
  cpu.cores_per_node = 4;
  struct Case {
    Machine machine;
    bool host, device;
    double gb_s, latency_us;
    int ignored;
  };
  for (const Case& c :
       {Case{device_node(), true, true, 100, 20, 3}, Case{cpu, true, true, 2, 5, 3},
        Case{device_node(), true, false, 2, 5, 0}, Case{cpu, false, true, 100, 20, 0}}) {
    SCOPED_TRACE(std::string(c.machine.cores_per_node ? "CPU node" : "device node") +
                 (c.host ? ", host lines" : "") + (c.device ? ", device lines" : ""));
    Machine m = c.machine;
    std::istringstream in(lines(c.host, c.device));
    const CalibrationSummary s = calibrate(m, in, "bench.jsonl");
    EXPECT_EQ(s.allreduce_fits, 1);
    EXPECT_EQ(s.ignored_lines, c.ignored);
    ASSERT_TRUE(m.measured_allreduce);
    EXPECT_NEAR(m.measured_allreduce->link.gb_s, c.gb_s, 1e-9 * c.gb_s);
    EXPECT_NEAR(m.measured_allreduce->link.latency_us, c.latency_us, 1e-6);
  }
}

TEST(PlanCalibration, ASplitRunsMeasurementGivesThatSplitsTimes) {
  // crest bench train --spatial 2,1,1 --profile: rank 0's block times, halo included, for a
  // batch of 2 per group; the unsplit prediction is left to the unsplit measurement or rate.
  Machine m = device_node();
  std::ostringstream lines;
  lines << R"({"bench":"train","model":"two","backend":"onednn","precision":"float32","threads":1,)"
        << R"("batch":2,"ranks":2,"spatial":"2,1,1","data_parallel":1,"step_s_min":0.020,)"
        << R"("update_s_min":0,"trainable_bytes":10000000})"
        << "\n"
        << R"({"layer":"a","forward_ms":3,"backward_ms":7,"forward_flop":1.1e9})"
        << "\n"
        << R"({"layer":"b","forward_ms":3,"backward_ms":7,"forward_flop":1.1e9})"
        << "\n"
        // A data-parallel run includes the exchange the model adds itself: left alone.
        << R"({"bench":"train","model":"two","ranks":2,"step_s_min":1})"
        << "\n";
  std::istringstream in(lines.str());
  const CalibrationSummary s = calibrate(m, in, "split.jsonl");
  EXPECT_EQ(s.trainings, 1);
  EXPECT_EQ(s.ignored_lines, 1);
  ASSERT_EQ(m.measured_training.size(), 1u);
  EXPECT_EQ(m.measured_training[0].spatial, (std::vector<int>{2, 1, 1}));
  const Prediction split = predict(two_layers(), m, {.ranks = 2, .spatial = {2, 1, 1}}, batch(2));
  EXPECT_EQ(split.source, ComputeSource::measured);
  EXPECT_NEAR(split.compute_s, 0.020, 1e-12);  // the measured step: the blocks' times
  EXPECT_EQ(split.halo_s, 0);                  // inside the layers' times
  // Another split has no measurement: planned from the rate with its halo.
  const Prediction other = predict(two_layers(), m, {.ranks = 2, .spatial = {1, 2, 1}}, batch(2));
  EXPECT_EQ(other.source, ComputeSource::given_rate);
  EXPECT_NEAR(other.compute_s, 0.5 * 2 * 6e-3, 1e-12);
}

// A bench train line of `ranks` ranks (independent when more than one) on one thread, batch 1,
// its two layers `layer_ms` forward and twice that backward, 1 ms of update.
std::string independent_profile(int ranks, double layer_ms) {
  std::ostringstream l;
  l << std::setprecision(17) << R"({"bench":"train","model":"two","backend":"onednn",)"
    << R"("precision":"float32","threads":1,"batch":1,"ranks":)" << ranks << R"(,"node_ranks":)"
    << ranks << (ranks > 1 ? R"(,"independent":true)" : "") << R"(,"step_s_min":)"
    << (6 * layer_ms + 1) / 1e3 << R"(,"update_s_min":0.001,"trainable_bytes":10000000})"
    << "\n";
  for (const char* name : {"a", "b"})
    l << R"({"layer":")" << name << R"(","forward_ms":)" << layer_ms << R"(,"backward_ms":)"
      << 2 * layer_ms << R"(,"forward_flop":1e9})"
      << "\n";
  return l.str();
}

TEST(PlanCalibration, IndependentRanksGiveTheComputeOfRanksSideBySide) {
  // A 2-core node: one rank alone takes 2 ms + 4 ms a layer; two independent ranks of one core
  // each 30 % longer; four, two to a core, 2.5 times as long (half a core each, and slower).
  Machine m;
  m.name = "cpu";
  m.ranks_per_node = 4;
  m.cores_per_node = 2;
  m.intra_node = {10, 0};
  std::istringstream in(independent_profile(1, 2) + independent_profile(2, 2.6) +
                        independent_profile(4, 5));
  EXPECT_EQ(calibrate(m, in, "b.jsonl").trainings, 3);
  ASSERT_EQ(m.measured_training.size(), 3u);  // kept apart: their ranks on the node differ
  EXPECT_EQ(m.measured_training[2].node_ranks, 4);
  // A plan of n ranks takes the measurement of n ranks side by side, as measured (the same
  // cores per rank): compute per sample is the layers' 2 x 3 x layer_ms and the update.
  for (const auto& [ranks, step_ms] : {std::pair{2, 16.6}, std::pair{4, 31.0}}) {
    const Prediction p =
        predict(two_layers(), m, {.ranks = ranks, .local_sgd_steps = 1000}, batch(ranks));
    EXPECT_NEAR(p.compute_s, step_ms / 1e3, 1e-12) << ranks;
    // The reference is one rank alone on the same cores: the neighbours' slowdown is lost
    // scaling (the 1-thread profile, at 0.5 cores for four ranks).
    const double alone_ms = ranks == 2 ? 13 : 26;
    EXPECT_NEAR(p.efficiency, alone_ms / (p.step_s * 1e3), 1e-9) << ranks;
    EXPECT_LT(p.efficiency, alone_ms / step_ms + 1e-9) << ranks;
  }
  // One rank of two cores: the profile of a rank alone, scaled to its two threads.
  EXPECT_NEAR(predict(two_layers(), m, {.ranks = 1}, batch(1)).compute_s, 0.0065, 1e-12);
  // Without the side-by-side measurements, two ranks are one rank's profile at one core each.
  m.measured_training.resize(1);
  EXPECT_NEAR(predict(two_layers(), m, {.ranks = 2, .local_sgd_steps = 1000}, batch(2)).compute_s,
              0.013, 1e-12);
  // An independent line from ranks on several nodes (node_ranks below ranks) is refused.
  std::string two_nodes = independent_profile(2, 2);
  two_nodes.replace(two_nodes.find(R"("node_ranks":2)"), 14, R"("node_ranks":1)");
  std::istringstream bad(two_nodes);
  try {
    calibrate(m, bad, "b.jsonl");
    ADD_FAILURE() << "an independent run across nodes was calibrated";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("b.jsonl:1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("node_ranks"), std::string::npos) << e.what();
  }
}

TEST(PlanCalibration, RefusesLinesItCannotUse) {
  Machine m = device_node();
  std::istringstream no_profile(
      R"({"bench":"train","model":"x","backend":"b","precision":"float32","threads":1,"batch":1,)"
      R"("ranks":1,"step_s_min":1,"update_s_min":0,"trainable_bytes":4})"
      "\n");
  EXPECT_THROW(
      {
        try {
          calibrate(m, no_profile, "b.jsonl");
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("b.jsonl:1"), std::string::npos);
          EXPECT_NE(std::string(e.what()).find("--profile"), std::string::npos);
          throw;
        }
      },
      Error);
  std::istringstream garbage("{\"bench\":\"peak\"}\nnot json\n");
  EXPECT_THROW(
      {
        try {
          calibrate(m, garbage, "b.jsonl");
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("b.jsonl:2: not a JSON line"), std::string::npos);
          throw;
        }
      },
      Error);
}

TEST(PlanModelFacts, CountWhatTheCompiledProgramCounts) {
  const Config c = load_config(test::source_path("configs/cosmoflow-demo.yaml"), {});
  const ModelFacts f = model_facts(c);
  EXPECT_EQ(f.model, "cosmoflow");
  size_t trainable = 0;
  int windowed = 0, heads = 0;
  for (const LayerFacts& l : f.layers) {
    trainable += l.trainable_bytes;
    windowed += l.windows.size() == 3;
    heads += l.dense_on_features;
  }
  // The flat buffer aligns each parameter: the padding is exchanged too.
  EXPECT_LE(trainable, f.trainable_bytes);
  EXPECT_GT(static_cast<double>(trainable), 0.999 * static_cast<double>(f.trainable_bytes));
  EXPECT_EQ(heads, 1);                                     // fc1 reads the flattened features
  EXPECT_GE(windowed, 4);                                  // a conv and a pool per block
  EXPECT_EQ(f.optimizer_state_bytes, f.trainable_bytes);   // SGD's velocity
  EXPECT_GE(f.gradient_lag_bytes, 2 * f.trainable_bytes);  // the lag's two gradient copies
  EXPECT_GT(f.arena_batch2, f.arena_batch1);
  EXPECT_EQ(f.sample_bytes, static_cast<size_t>(c.data.model_sample_shape().numel()) * 4);
  EXPECT_GT(f.forward_flops(), 0);
  EXPECT_GT(f.backward_flops(), f.forward_flops());
}

}  // namespace
}  // namespace crest
