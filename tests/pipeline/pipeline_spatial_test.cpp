// Pipeline stages whose every stage is split spatially, under mpirun on 4 ranks: the pipeline
// tests' network (stage_test_network.hpp) in 2 stages, each a group of 2 ranks splitting the depth
// axis (rank (stage * 2 + place), as make_hybrid_groups lays
// them out). Every rank also runs the whole network alone over the same micro-batches,
// accumulating; after one batch of the pipeline, the stage's gradients averaged over its group
// must be that accumulation, the loss and batch norm's running statistics too (float64, 1e-10).
// Three cuts: where split values cross (the skip branch: two blocks sent), where a received
// block must be gathered (the stage after cannot split its pooling), and where a value with the
// grid's axes crosses whole (a spatial mean's: the stage after must not split it).
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "crest/engine/batch_norm_sync.hpp"
#include "crest/engine/pipeline_stage.hpp"
#include "crest/spatial/hybrid_groups.hpp"
#include "stage_test_network.hpp"
#include "world.hpp"

namespace crest {
namespace {

using test::expect_close;
using test::random_values;
using test::write;

constexpr int kMicroBatch = 2, kMicroBatches = 4, kStages = 2;
using test::BatchResult;
using test::collect;
using test::kSample;
using test::network;

CompileOptions compile_options() {
  CompileOptions o;
  o.dtype = DType::f64;
  o.batch = kMicroBatch;
  o.seed = 11;
  return o;
}

std::vector<double> whole_x(int m) {
  return random_values(static_cast<size_t>(kSample.numel() * kMicroBatch),
                       static_cast<uint32_t>(300 + m));
}

std::vector<double> y_of(int m) {
  return random_values(size_t{3} * kMicroBatch, static_cast<uint32_t>(900 + m));
}

// One process, the whole network: the micro-batches' mean gradient.
BatchResult accumulate(Backend& backend) {
  Executor ex(network(), backend, compile_options());
  return test::accumulate_batch(ex, kMicroBatches, [&](int m) {
    write(ex.input("x"), whole_x(m));
    write(ex.input("y"), y_of(m));
  });
}

// Micro-batch m's inputs the stage reads: this rank's block of x, the whole y.
void feed(const SpatialSplit& split, Executor& ex, const PipelineStageGraph& g, int m) {
  for (const std::string& name : g.data_inputs) {
    if (name == "y") {
      write(ex.input("y"), y_of(m));
      continue;
    }
    const TensorView block = ex.input("x");
    const Shape global = kSample.with_batch(kMicroBatch);
    ASSERT_NE(block.shape(), global);  // the samples are split
    std::vector<double> mine(static_cast<size_t>(block.shape().numel()));
    split.copy_block(whole_x(m).data(), global, Layout::channels_last, DType::f64, mine.data());
    write(block, mine);
  }
}

void check_cut(const std::string& stage_start, PipelineScheduleKind schedule, bool recompute) {
  SCOPED_TRACE("cut at " + stage_start + (recompute ? ", recomputed" : ""));
  Communicator& world = test::world();
  auto backend = make_backend("reference");
  const BatchResult want = accumulate(*backend);
  const HybridGroups groups =
      make_hybrid_groups(world, {2, 1, 1}, "dist.spatial", HaloOverlapMode::automatic, kStages);
  const int place = world.rank() % 2, stage = world.rank() / 2;
  const auto graphs = cut_into_stages(network(), {stage_start}, "dist.pipeline");
  const PipelineStageGraph& mine = graphs[static_cast<size_t>(stage)];
  CompileOptions o = compile_options();
  o.spatial = groups.split;
  PipelineStage runner(mine, *backend, o, world,
                       {.stage = stage,
                        .stages = kStages,
                        .micro_batches = kMicroBatches,
                        .schedule = schedule,
                        .recompute = recompute,
                        .previous_rank = stage > 0 ? world.rank() - 2 : -1,
                        .next_rank = stage + 1 < kStages ? world.rank() + 2 : -1});
  // The stage's ranks, its group consecutive: batch norm sums the group's statistics, and the
  // split layers' gradient shares are averaged over it (as GradientSync does).
  auto stage_ranks = world.split(stage, place);
  auto bn = make_batch_norm_group(*stage_ranks, 1, 2);
  runner.set_batch_stat_reducer(bn.get());
  const StageStepResult r =
      runner.run([&](int m, Executor& ex) { feed(*groups.split, ex, mine, m); });
  ParamStore& p = runner.executor().params();
  stage_ranks
      ->start_allreduce(static_cast<double*>(p.grads()), p.trainable_count_padded(), 0.5,
                        "stage gradients")
      ->wait();
  BatchResult got;
  collect(runner.executor(), got);
  if (stage + 1 == kStages) {
    EXPECT_NEAR(r.data_loss + r.penalty, want.loss, 1e-10 * (1 + std::fabs(want.loss)));
  }
  EXPECT_FALSE(got.grads.empty());
  for (const auto& [name, g] : got.grads) expect_close(g, want.grads.at(name), 1e-10, name);
  for (const auto& [name, v] : got.state) expect_close(v, want.state.at(name), 1e-10, name);
}

TEST(PipelineSpatial, TwoSplitStagesEqualOneProcessAccumulatingFloat64) {
  if (test::world().size() != 4) GTEST_SKIP() << "runs on 4 ranks";
  check_cut("conv3", PipelineScheduleKind::one_forward_one_backward, false);
  check_cut("conv3", PipelineScheduleKind::gpipe, true);
  check_cut("pool2", PipelineScheduleKind::one_forward_one_backward, false);
  check_cut("flatten", PipelineScheduleKind::gpipe, false);
}

}  // namespace
}  // namespace crest
