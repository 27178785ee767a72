// Pipeline stages under mpirun (tests/world/main.cpp), against one process: every rank runs the
// whole network itself over the same micro-batches with gradient accumulation (each micro-batch's
// gradient summed, the sum divided by M), then its stage of the pipeline, and compares the loss,
// its stage's every parameter gradient and batch norm's running statistics — for 2 and 4 stages,
// M = 1, 4 and 8, GPipe and 1F1B, with and without recomputation, over two batches (the second's
// dropout masks continue the first's). float64 on the reference backend within 1e-10; float32 on
// oneDNN within 1e-5. On 4 ranks also 2 stages x 2 data-parallel replicas, whose averaged
// gradients equal the mean of both replicas' single-process accumulations. Then training: three
// SGD and LAMB updates through PipelineTrainStep leave the weights one process reaches.
#include "crest/engine/pipeline_stage.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "../support/counting_backend.hpp"
#include "crest/engine/pipeline_train_step.hpp"
#include "crest/layers/activation.hpp"
#include "crest/layers/batch_norm.hpp"
#include "crest/layers/conv.hpp"
#include "crest/layers/dense.hpp"
#include "crest/layers/elementwise.hpp"
#include "crest/layers/loss.hpp"
#include "crest/layers/pool.hpp"
#include "crest/layers/shape_ops.hpp"
#include "crest/optim/optimizer_registry.hpp"
#include "crest/train/trainer.hpp"
#include "stage_test_network.hpp"
#include "world.hpp"

namespace crest {
namespace {

using test::expect_close;
using test::has_backend;
using test::random_values;
using test::read;
using test::write;

constexpr int64_t kMicroBatch = 2;
using test::BatchResult;
using test::collect;
using test::kSample;
using test::network;

// Where stages 1.. start: 2 stages split the skip branch (pool1 and act2 cross); 4 stages make
// pool1 pass through stage 1 untouched by any of its nodes but one.
std::vector<std::string> stage_starts(int stages) {
  if (stages == 2) return {"conv3"};
  return {"conv2", "conv3", "pool2"};
}

// Micro-batch m of replica `replica`'s batch `batch`: its inputs, the same on every rank.
void feed(Executor& ex, int replica, int batch, int m, bool has_x, bool has_y) {
  const auto seed = static_cast<uint32_t>(1000 * replica + 100 * batch + m);
  if (has_x) write(ex.input("x"), random_values(size_t(kSample.numel() * kMicroBatch), seed));
  if (has_y) write(ex.input("y"), random_values(size_t(3 * kMicroBatch), seed + 50000));
}

CompileOptions compile_options(DType dtype) {
  CompileOptions o;
  o.dtype = dtype;
  o.batch = kMicroBatch;
  o.seed = 11;
  return o;
}

// One process: `batches` batches of M micro-batches each, gradients accumulated per batch.
std::vector<BatchResult> accumulate(Backend& backend, DType dtype, int replica, int micro_batches,
                                    int batches) {
  Executor ex(network(), backend, compile_options(dtype));
  std::vector<BatchResult> out;
  out.reserve(static_cast<size_t>(batches));
  for (int b = 0; b < batches; ++b)
    out.push_back(test::accumulate_batch(ex, micro_batches,
                                         [&](int m) { feed(ex, replica, b, m, true, true); }));
  return out;
}

struct Case {
  int stages = 2, micro_batches = 1;
  PipelineScheduleKind schedule = PipelineScheduleKind::gpipe;
  bool recompute = false;
  std::string str() const {
    return std::to_string(stages) + " stages x " + std::to_string(micro_batches) +
           " micro-batches, " + (schedule == PipelineScheduleKind::gpipe ? "GPipe" : "1F1B") +
           (recompute ? ", recompute" : "");
  }
};

// Ranks d * K + s: replica d's stage s. The stage's gradients are averaged over the replicas.
void check_pipeline(const Case& c, Backend& backend, DType dtype, double tol) {
  SCOPED_TRACE(c.str());
  Communicator& world = test::world();
  const int replicas = world.size() / c.stages;
  const int stage = world.rank() % c.stages, replica = world.rank() / c.stages;
  constexpr int kBatches = 2;
  std::vector<std::vector<BatchResult>> whole;
  whole.reserve(static_cast<size_t>(replicas));
  for (int d = 0; d < replicas; ++d)
    whole.push_back(accumulate(backend, dtype, d, c.micro_batches, kBatches));

  const auto stages = cut_into_stages(network(), stage_starts(c.stages), "dist.pipeline");
  const PipelineStageGraph& mine = stages[static_cast<size_t>(stage)];
  PipelineStageOptions o{.stage = stage,
                         .stages = c.stages,
                         .micro_batches = c.micro_batches,
                         .schedule = c.schedule,
                         .recompute = c.recompute,
                         .previous_rank = stage > 0 ? world.rank() - 1 : -1,
                         .next_rank = stage + 1 < c.stages ? world.rank() + 1 : -1};
  PipelineStage runner(mine, backend, compile_options(dtype), world, o);
  auto replicas_of_stage = world.split(stage, replica);
  const bool has_x = stage == 0, has_y = stage + 1 == c.stages;
  for (int b = 0; b < kBatches; ++b) {
    SCOPED_TRACE("batch " + std::to_string(b));
    const StageStepResult r =
        runner.run([&](int m, Executor& ex) { feed(ex, replica, b, m, has_x, has_y); });
    ParamStore& p = runner.executor().params();
    if (replicas > 1 && dtype == DType::f64)
      replicas_of_stage
          ->start_allreduce(static_cast<double*>(p.grads()), p.trainable_count_padded(),
                            1.0 / replicas, "stage gradients")
          ->wait();
    BatchResult got;
    collect(runner.executor(), got);
    // The reference: the replicas' mean gradient, and this replica's loss and statistics.
    const BatchResult& want = whole[static_cast<size_t>(replica)][static_cast<size_t>(b)];
    if (has_y) {
      EXPECT_NEAR(r.data_loss + r.penalty, want.loss, tol * (1 + std::fabs(want.loss)));
      EXPECT_GT(r.penalty, 0.0);  // the dense layer's L2 lives on the last stage
    } else {
      EXPECT_EQ(r.data_loss, 0.0);
      EXPECT_EQ(r.penalty, 0.0);
    }
    EXPECT_FALSE(got.grads.empty());
    for (const auto& [name, g] : got.grads) {
      std::vector<double> mean(g.size(), 0.0);
      for (const auto& rep : whole)
        for (size_t i = 0; i < g.size(); ++i)
          mean[i] += rep[static_cast<size_t>(b)].grads.at(name)[i] / replicas;
      expect_close(g, mean, tol, "gradient of " + name);
    }
    for (const auto& [name, v] : got.state) expect_close(v, want.state.at(name), tol, name);
  }
}

void check_pipeline(const Case& c, const std::string& backend_name, DType dtype, double tol) {
  check_pipeline(c, *make_backend(backend_name), dtype, tol);
}

std::vector<Case> cases(int stages) {
  std::vector<Case> out;
  for (int m : {1, 4, 8})
    for (auto kind : {PipelineScheduleKind::gpipe, PipelineScheduleKind::one_forward_one_backward})
      for (bool recompute : {false, true}) out.push_back({stages, m, kind, recompute});
  return out;
}

TEST(PipelineStages, EveryScheduleEqualsOneProcessAccumulatingFloat64) {
  const int ranks = test::world().size();
  if (ranks != 2 && ranks != 4) GTEST_SKIP() << "runs on 2 or 4 ranks";
  for (const Case& c : cases(ranks)) check_pipeline(c, "reference", DType::f64, 1e-10);
}

TEST(PipelineStages, TwoStagesTimesTwoReplicasEqualTheReplicasMeanFloat64) {
  if (test::world().size() != 4) GTEST_SKIP() << "runs on 4 ranks";
  check_pipeline({2, 4, PipelineScheduleKind::one_forward_one_backward, false}, "reference",
                 DType::f64, 1e-10);
  check_pipeline({2, 4, PipelineScheduleKind::gpipe, true}, "reference", DType::f64, 1e-10);
}

TEST(PipelineStages, Float32OnOneDnnEqualsOneProcessAccumulating) {
  const int ranks = test::world().size();
  if (ranks != 2 && ranks != 4) GTEST_SKIP() << "runs on 2 or 4 ranks";
  if (!has_backend("onednn")) GTEST_SKIP() << "built without oneDNN";
  for (bool recompute : {false, true})
    check_pipeline({ranks, 4, PipelineScheduleKind::one_forward_one_backward, recompute}, "onednn",
                   DType::f32, 1e-5);
}

// A device backend (the pretend device: the reference kernels on memory that says it is not the
// host's): the stages equal one process as on the host, and every message is copied off the
// device before it is sent and onto it once received — with recomputation, each micro-batch's
// kept inputs too.
TEST(PipelineStages, OnADeviceBackendMessagesGoThroughHostCopies) {
  Communicator& world = test::world();
  if (world.size() != 2) GTEST_SKIP() << "runs on 2 ranks";
  test::CountingBackend device(/*pretend_device=*/true);
  check_pipeline({2, 4, PipelineScheduleKind::one_forward_one_backward, false}, device, DType::f64,
                 1e-10);
  check_pipeline({2, 4, PipelineScheduleKind::gpipe, true}, device, DType::f64, 1e-10);

  constexpr int kMicroBatches = 4;
  const auto stages = cut_into_stages(network(), stage_starts(2), "dist.pipeline");
  const int stage = world.rank();
  for (bool recompute : {false, true}) {
    SCOPED_TRACE(recompute ? "recompute" : "keep activations");
    PipelineStage runner(stages[static_cast<size_t>(stage)], device, compile_options(DType::f64),
                         world,
                         {.stage = stage,
                          .stages = 2,
                          .micro_batches = kMicroBatches,
                          .schedule = PipelineScheduleKind::one_forward_one_backward,
                          .recompute = recompute,
                          .previous_rank = stage - 1,
                          .next_rank = stage == 0 ? 1 : -1});
    const test::CountingMemory& memory = device.memory();
    const int to_host = memory.copies_to_host, to_device = memory.copies_to_device;
    runner.run([&](int m, Executor& ex) { feed(ex, 0, 0, m, stage == 0, stage == 1); });
    // Per micro-batch: the values crossing the cut one way, their gradients the other; with
    // recomputation the stage's inputs (stage 0: x; stage 1: the received values and y) kept
    // off the device, and put back before the recomputed forward (the first stage's: under 1F1B
    // the last runs each backward right after its forward, and recomputes nothing).
    const int crossing = static_cast<int>(stages[0].sent.size());
    const int inputs = stage == 0 ? 1 : crossing + 1;
    const int kept = recompute ? inputs : 0, put_back = recompute && stage == 0 ? inputs : 0;
    EXPECT_GE(memory.copies_to_host - to_host, kMicroBatches * (crossing + kept));
    EXPECT_GE(memory.copies_to_device - to_device, kMicroBatches * (crossing + put_back));
    EXPECT_GT(crossing, 0);
  }
}

// Evaluation through the stages after a training batch (so batch norm's running statistics are
// the batch's): each micro-batch's prediction and the mean loss are one process's.
TEST(PipelineStages, EvaluationEqualsOneProcessFloat64) {
  Communicator& world = test::world();
  const int stages = world.size();
  if (stages != 2 && stages != 4) GTEST_SKIP() << "runs on 2 or 4 ranks";
  constexpr int kMicroBatches = 4;
  auto backend = make_backend("reference");
  Executor whole(network(), *backend, compile_options(DType::f64));
  for (int m = 0; m < kMicroBatches; ++m) {
    feed(whole, 0, 0, m, true, true);
    whole.forward();
    whole.backward();
  }
  std::vector<std::vector<double>> predictions;
  double loss = 0;
  for (int m = 0; m < kMicroBatches; ++m) {
    feed(whole, 0, 1, m, true, true);
    whole.forward(false);
    loss += whole.last_data_loss() / kMicroBatches;
    predictions.push_back(read(whole.output(network().outputs()[0])));
  }
  const auto graphs = cut_into_stages(network(), stage_starts(stages), "dist.pipeline");
  const int s = world.rank();
  for (bool recompute : {false, true}) {
    SCOPED_TRACE(recompute ? "recompute" : "activation sets");
    PipelineStage runner(graphs[static_cast<size_t>(s)], *backend, compile_options(DType::f64),
                         world,
                         {.stage = s,
                          .stages = stages,
                          .micro_batches = kMicroBatches,
                          .recompute = recompute,
                          .previous_rank = s - 1,
                          .next_rank = s + 1 < stages ? s + 1 : -1});
    const bool last = s + 1 == stages;
    runner.run([&](int m, Executor& ex) { feed(ex, 0, 0, m, s == 0, last); });
    const uint64_t steps = runner.executor().training_steps();
    int seen = 0;
    const double got =
        runner.evaluate([&](int m, Executor& ex) { feed(ex, 0, 1, m, s == 0, last); },
                        [&](int m, const Executor& ex) {
                          const ValueId out = graphs.back().graph.outputs()[0];
                          expect_close(read(ex.output(out)), predictions[static_cast<size_t>(m)],
                                       1e-10, "prediction of micro-batch " + std::to_string(m));
                          ++seen;
                        });
    EXPECT_EQ(seen, last ? kMicroBatches : 0);
    if (last)
      EXPECT_NEAR(got, loss, 1e-10 * (1 + loss));
    else
      EXPECT_EQ(got, 0.0);
    EXPECT_EQ(runner.executor().training_steps(), steps);  // evaluation draws no dropout step
  }
}

TEST(PipelineStages, ActivationSetsFollowTheSchedule) {
  Communicator& world = test::world();
  if (world.size() != 4) GTEST_SKIP() << "runs on 4 ranks";
  auto backend = make_backend("reference");
  const auto stages = cut_into_stages(network(), stage_starts(4), "dist.pipeline");
  const int s = world.rank();
  auto sets = [&](PipelineScheduleKind kind, bool recompute) {
    PipelineStageOptions o{.stage = s,
                           .stages = 4,
                           .micro_batches = 8,
                           .schedule = kind,
                           .recompute = recompute,
                           .previous_rank = s - 1,
                           .next_rank = s < 3 ? s + 1 : -1};
    return PipelineStage(stages[static_cast<size_t>(s)], *backend, compile_options(DType::f64),
                         world, o)
        .activation_sets();
  };
  EXPECT_EQ(sets(PipelineScheduleKind::gpipe, false), 8);
  EXPECT_EQ(sets(PipelineScheduleKind::one_forward_one_backward, false), 4 - s);
  EXPECT_EQ(sets(PipelineScheduleKind::gpipe, true), 1);
}

// DeepCAM (its skip connections: several values cross a cut) at 16 x 32 in float64: the stages'
// gradients after one batch of 2 micro-batches are one process's accumulation.
void feed_model(Executor& ex, const std::vector<std::string>& inputs, int m) {
  for (const std::string& name : inputs) {
    const TensorView t = ex.input(name);
    if (t.desc().dtype == DType::i32) {
      for (int64_t i = 0; i < t.desc().shape.numel(); ++i)
        t.as<int32_t>()[i] = static_cast<int32_t>((i * 7 + m) % 3);
    } else {
      write(t, random_values(static_cast<size_t>(t.desc().shape.numel()),
                             static_cast<uint32_t>(70 + m)));
    }
  }
}

TEST(PipelineStages, DeepcamEqualsOneProcessAccumulatingFloat64) {
  Communicator& world = test::world();
  const int stages = world.size();
  // 40 s of float64 reference kernels on the whole model per rank: once, on 2 ranks.
  if (stages != 2) GTEST_SKIP() << "runs on 2 ranks";
  ModelConfig mc;
  mc.name = "deepcam";
  mc.attrs.set("input_shape", std::vector<int64_t>{16, 32, 16});
  const BuiltModel model = build_model(mc);
  const Graph& g = model.graph;
  constexpr int kMicroBatches = 2;
  auto backend = make_backend("reference");
  CompileOptions o = compile_options(DType::f64);
  o.batch = 1;
  const std::vector<std::string> both{model.sample_input, model.target_input};
  Executor whole(g, *backend, o);
  std::map<std::string, std::vector<double>> want;
  for (int m = 0; m < kMicroBatches; ++m) {
    feed_model(whole, both, m);
    whole.forward();
    whole.backward();
    BatchResult one;
    collect(whole, one);
    for (auto& [name, grad] : one.grads) {
      auto& w = want[name];
      w.resize(grad.size());
      for (size_t i = 0; i < grad.size(); ++i) w[i] += grad[i] / kMicroBatches;
    }
  }
  std::vector<std::string> starts;
  for (size_t at : balanced_stage_starts(std::vector<double>(g.nodes().size(), 1.0), stages))
    starts.push_back(g.nodes()[at].name);
  const auto graphs = cut_into_stages(g, starts, "dist.pipeline");
  const int s = world.rank();
  const PipelineStageGraph& mine = graphs[static_cast<size_t>(s)];
  if (s + 1 < stages) {
    EXPECT_GE(mine.sent.size(), 1u);
  }
  PipelineStage runner(mine, *backend, o, world,
                       {.stage = s,
                        .stages = stages,
                        .micro_batches = kMicroBatches,
                        .schedule = PipelineScheduleKind::one_forward_one_backward,
                        .previous_rank = s - 1,
                        .next_rank = s + 1 < stages ? s + 1 : -1});
  runner.run([&](int m, Executor& ex) { feed_model(ex, mine.data_inputs, m); });
  BatchResult got;
  collect(runner.executor(), got);
  EXPECT_FALSE(got.grads.empty());
  for (const auto& [name, grad] : got.grads)
    expect_close(grad, want.at(name), 1e-10, "gradient of " + name);
}

// Three optimizer steps, with the stages' gradients averaged over their replicas: the weights equal
// one process's that averages every replica's micro-batches and updates the whole model. LAMB's
// clipping reads the whole model's gradient norm, which no stage has alone.
OptimizerConfig optimizer_config(const std::string& name) {
  OptimizerConfig o;
  o.name = name;
  if (const auto& defaults = find_optimizer_type(name).set_defaults) defaults(o);
  if (o.takes("momentum")) o.momentum = 0.9;
  o.max_grad_norm = 0.05;  // LAMB: small enough to clip, so the global norm matters
  return o;
}

std::map<std::string, std::vector<double>> trained_weights(const Executor& ex) {
  std::map<std::string, std::vector<double>> w;
  const ParamStore& p = ex.params();
  for (size_t s = 0; s < p.slots().size(); ++s)
    if (p.slots()[s].spec.trainable) w[p.slots()[s].name] = read(p.value(s));
  return w;
}

// One process: each step, every replica's M micro-batches (the step counter where each replica's
// batch starts, as on its own rank), their gradients averaged, one update.
std::map<std::string, std::vector<double>> train_whole(Backend& backend, const std::string& opt,
                                                       int replicas, int micro_batches, int steps,
                                                       double& last_loss) {
  Executor ex(network(), backend, compile_options(DType::f64));
  auto optimizer = make_optimizer(optimizer_config(opt));
  optimizer->attach(ex.params(), ex.vec());
  const ParamStore& p = ex.params();
  const size_t n = p.trainable_count_padded();
  for (int b = 0; b < steps; ++b) {
    std::vector<double> sum(n, 0.0);
    last_loss = 0;
    for (int d = 0; d < replicas; ++d) {
      ex.set_training_steps(static_cast<uint64_t>(b) * static_cast<uint64_t>(micro_batches));
      for (int m = 0; m < micro_batches; ++m) {
        feed(ex, d, b, m, true, true);
        last_loss += ex.forward() / (micro_batches * replicas);
        ex.backward();
        const auto* g = static_cast<const double*>(p.grads());
        for (size_t i = 0; i < n; ++i) sum[i] += g[i] / (micro_batches * replicas);
      }
    }
    std::copy(sum.begin(), sum.end(), static_cast<double*>(p.grads()));
    optimizer->step(0.05);
  }
  return trained_weights(ex);
}

void check_training(int stages, const std::string& opt) {
  SCOPED_TRACE(std::to_string(stages) + " stages, " + opt);
  Communicator& world = test::world();
  const int replicas = world.size() / stages;
  const int stage = world.rank() % stages, replica = world.rank() / stages;
  constexpr int kMicroBatches = 4, kSteps = 3;
  auto backend = make_backend("reference");
  double whole_loss = 0;
  const auto want = train_whole(*backend, opt, replicas, kMicroBatches, kSteps, whole_loss);

  const auto graphs = cut_into_stages(network(), stage_starts(stages), "dist.pipeline");
  PipelineStage runner(graphs[static_cast<size_t>(stage)], *backend, compile_options(DType::f64),
                       world,
                       {.stage = stage,
                        .stages = stages,
                        .micro_batches = kMicroBatches,
                        .schedule = PipelineScheduleKind::one_forward_one_backward,
                        .previous_rank = stage > 0 ? world.rank() - 1 : -1,
                        .next_rank = stage + 1 < stages ? world.rank() + 1 : -1});
  auto replicas_of_stage = world.split(stage, replica);
  auto optimizer = make_optimizer(optimizer_config(opt));
  PipelineTrainStep step(runner, *optimizer, PipelineStepComms{world, replicas_of_stage.get()});
  PipelineStepResult r;
  for (int b = 0; b < kSteps; ++b)
    r = step.run(0.05, [&](int m, Executor& ex) {
      feed(ex, replica, b, m, stage == 0, stage + 1 == stages);
    });
  EXPECT_TRUE(r.finite);
  EXPECT_NEAR(r.loss, whole_loss, 1e-10 * (1 + std::fabs(whole_loss)));
  const auto got = trained_weights(runner.executor());
  EXPECT_FALSE(got.empty());
  for (const auto& [name, w] : got) expect_close(w, want.at(name), 1e-10, "weight " + name);
}

TEST(PipelineTraining, StepsWithSgdAndLambEqualOneProcessFloat64) {
  const int ranks = test::world().size();
  if (ranks != 2 && ranks != 4) GTEST_SKIP() << "runs on 2 or 4 ranks";
  for (const std::string opt : {"SGD", "LAMB"}) {
    check_training(ranks, opt);
    if (ranks == 4) check_training(2, opt);  // 2 stages x 2 replicas
  }
}

}  // namespace
}  // namespace crest
