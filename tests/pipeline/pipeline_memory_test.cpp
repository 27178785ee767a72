// A pipeline's memory check (2 ranks, two stages): no rank holds the whole model, so the whole
// model's plan is not checked against a rank's limit; each stage's compile checks what the stage
// holds, every activation set and its micro-batches' gradient sum included.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "crest/core/error.hpp"
#include "crest/engine/pipeline_training_session.hpp"
#include "crest/layers/activation.hpp"
#include "crest/layers/dense.hpp"
#include "crest/layers/loss.hpp"
#include "crest/optim/optimizer_registry.hpp"
#include "world.hpp"

namespace crest {
namespace {

constexpr int64_t kMicroBatch = 256;  // the activations outweigh the parameters

// Eight equal dense layers with tanh, then the prediction: cut in the middle, each stage holds
// about half the activations.
Graph chain() {
  Graph g;
  ValueId t = g.input("x", Shape{64});
  const ValueId y = g.input("y", Shape{3});
  DenseOptions d;
  d.out_features = 64;
  for (int i = 1; i <= 8; ++i) {
    t = g.add("fc" + std::to_string(i), layers::dense(d), {t});
    t = g.add("act" + std::to_string(i), layers::tanh(), {t});
  }
  d.out_features = 3;
  const ValueId out = g.add("out", layers::dense(d), {t});
  g.mark_output(out);
  g.set_loss(g.add("loss", layers::mse_loss(), {out, y}));
  return g;
}

TrainingSessionOptions sgd_with_momentum(size_t memory_limit) {
  TrainingSessionOptions to;
  to.session.backend = "reference";
  to.session.batch = kMicroBatch;
  to.session.seed = 11;
  to.session.memory_limit = memory_limit;
  to.session.memory_limit_source = "a test's limit";
  to.session.memory_limit_set = true;
  to.optimizer.name = "SGD";
  if (const auto& defaults = find_optimizer_type("SGD").set_defaults) defaults(to.optimizer);
  to.optimizer.momentum = 0.9;
  return to;
}

PipelineOptions two_stages(int micro_batches) {
  PipelineOptions po;
  po.stages = 2;
  po.micro_batches = micro_batches;
  po.schedule = PipelineScheduleKind::gpipe;  // GPipe: M activation sets on every stage
  po.stage_starts = {"fc5"};
  return po;
}

// What this rank's stage plans, and the most any stage plans.
size_t stage_planned(int micro_batches, size_t limit = 0) {
  PipelineTrainingSession p(chain(), sgd_with_momentum(limit), two_stages(micro_batches),
                            test::world());
  return p.executor().planned_memory().total();
}

size_t largest_over_ranks(size_t bytes) {
  return static_cast<size_t>(test::world().allreduce_max(static_cast<double>(bytes)));
}

size_t smallest_over_ranks(size_t bytes) {
  return static_cast<size_t>(-test::world().allreduce_max(-static_cast<double>(bytes)));
}

TEST(PipelineMemory, EachStageIsCheckedForWhatItHolds) {
  if (test::world().size() != 2) GTEST_SKIP() << "runs on 2 ranks";
  // The whole model at the micro-batch, without and with its optimizer's state (one process's).
  auto backend = make_backend("reference");
  CompileOptions whole;
  whole.batch = kMicroBatch;
  whole.allocate = false;
  const size_t whole_plan = Executor(chain(), *backend, whole).planned_memory().total();
  whole.beside.trainable_copies = 1;  // SGD's momentum
  const size_t one_process = Executor(chain(), *backend, whole).planned_memory().total();
  // One micro-batch: a limit every stage fits but the whole model does not. The stages compile.
  const size_t stages_need = largest_over_ranks(stage_planned(1));
  ASSERT_LT(stages_need, whole_plan) << "the test's network must need more than either stage";
  ASSERT_LT(stages_need, one_process);
  EXPECT_NO_THROW(stage_planned(1, stages_need));
  // Four micro-batches: GPipe holds four sets of activations and sums the micro-batches'
  // gradients. A limit just below what the smallest stage needs refuses every stage, naming
  // the sets, although one set with the state fitted above.
  const size_t four_sets = stage_planned(4);
  const size_t limit = smallest_over_ranks(four_sets) - 1;
  try {
    stage_planned(4, limit);
    FAIL() << "a stage compiled beyond its limit";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.kind(), ErrorKind::input);
    EXPECT_EQ(what.rfind("a test's limit: the compiled program needs", 0), 0u) << what;
    EXPECT_NE(what.find("(4 sets)"), std::string::npos) << what;
    EXPECT_NE(what.find("optimizer state"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace crest
