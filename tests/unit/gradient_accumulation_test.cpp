// Gradient accumulation (train.gradient_accumulation_frequency): k micro-batches of batch b take
// the same optimizer step as one batch of k b, on models without batch norm (whose statistics
// would differ by construction), in float64 on the reference backend: the regression graph with
// an L2 penalty under SGD, and the DeepLab-shaped segmentation graph (class-weighted softmax
// cross-entropy) under LAMB; the first under LARS and the second under LARC over Adam. Between
// updates the weights do not move and the optimizer's step count (what the LR schedule counts)
// advances once per window.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "crest/core/error.hpp"
#include "crest/engine/train_step.hpp"
#include "crest/optim/lamb.hpp"
#include "crest/optim/larc.hpp"
#include "crest/optim/lars.hpp"
#include "crest/optim/optimizer.hpp"
#include "support/small_models.hpp"
#include "support/test_util.hpp"

namespace crest {
namespace {

using MakeOptimizer = std::function<std::unique_ptr<Optimizer>()>;

std::unique_ptr<Executor> compile(const Graph& g, Backend& backend, int64_t batch) {
  CompileOptions c;
  c.batch = batch;
  c.dtype = DType::f64;
  c.seed = 7;
  return std::make_unique<Executor>(g, backend, c);
}

// Fills `big`'s inputs with two windows of data: x uniform, y uniform (float targets) or class
// ids 0..2 (integer labels).
void fill_inputs(Executor& big, const Graph& g, uint64_t seed) {
  test::fill_uniform(big.input("x"), seed);
  const TensorView y = big.input("y");
  if (g.inputs().at(1).integer) {
    int32_t* labels = y.as<int32_t>();
    for (int64_t i = 0; i < y.numel(); ++i) labels[i] = static_cast<int32_t>((i * 7 + seed) % 3);
  } else {
    test::fill_uniform(y, seed + 1, -0.9, 0.9);
  }
}

// Sample `i` of `big`'s inputs into `small` (batch 1).
void copy_sample(const Executor& big, Executor& small, int64_t i) {
  for (const char* name : {"x", "y"}) {
    const TensorView from = big.input(name), to = small.input(name);
    const size_t bytes = to.bytes();
    std::memcpy(to.data(), static_cast<const char*>(from.data()) + i * bytes, bytes);
  }
}

std::vector<char> weights(const Executor& ex) {
  const char* p = static_cast<const char*>(ex.params().values());
  return {p, p + ex.params().bytes()};
}

double max_weight_difference(const Executor& a, const Executor& b) {
  double d = 0;
  for (size_t s = 0; s < a.params().slots().size(); ++s) {
    const auto& slot = a.params().slots()[s];
    for (size_t i = 0; i < slot.count; ++i)
      d = std::max(
          d, std::abs(a.params().value(s).as<double>()[i] - b.params().value(s).as<double>()[i]));
  }
  return d;
}

void check_accumulation(const test::SmallModel& m, const MakeOptimizer& make, double lr) {
  auto backend = make_backend("reference");
  auto big = compile(m.graph, *backend, 2);
  auto small = compile(m.graph, *backend, 1);
  ASSERT_EQ(big->params().bytes(), small->params().bytes());
  std::memcpy(small->params().values(), big->params().values(), big->params().bytes());
  auto whole = make(), split = make();
  whole->attach(big->params(), big->vec(), 1);
  split->attach(small->params(), small->vec(), 2);
  ASSERT_NE(split->gradient_sum(), nullptr);
  EXPECT_EQ(whole->gradient_sum(), nullptr);
  EXPECT_EQ(split->state().back().first, "gradient_sum");
  TrainStep one(*big, *whole, nullptr), two(*small, *split, nullptr);
  for (int window = 0; window < 3; ++window) {
    fill_inputs(*big, m.graph, 100 + static_cast<uint64_t>(window));
    const StepResult r = one.run(lr);
    EXPECT_TRUE(r.updated);

    const std::vector<char> before = weights(*small);
    EXPECT_FALSE(two.next_updates());
    copy_sample(*big, *small, 0);
    const StepResult first = two.run(lr);
    EXPECT_FALSE(first.updated);
    EXPECT_TRUE(two.window_open());
    EXPECT_EQ(weights(*small), before) << "the first micro-batch must not move the weights";
    EXPECT_EQ(split->steps_taken(), window);

    EXPECT_TRUE(two.next_updates());
    copy_sample(*big, *small, 1);
    const StepResult second = two.run(lr);
    EXPECT_TRUE(second.updated);
    EXPECT_FALSE(two.window_open());
    EXPECT_EQ(split->steps_taken(), window + 1);
    EXPECT_EQ(two.micro_batches(), 2 * (window + 1));
    // The batch's loss is the mean of its samples' losses (penalties included in each).
    EXPECT_NEAR((first.loss + second.loss) / 2, r.loss, 1e-13 * std::abs(r.loss));
    EXPECT_LT(max_weight_difference(*big, *small), 1e-13) << "window " << window;
  }
}

TEST(GradientAccumulation, TwoMicroBatchesEqualOneBatchOfTwoUnderSgdWithL2) {
  check_accumulation(
      test::branchy_model(), [] { return std::make_unique<SgdKeras>(0.9); }, 0.05);
}

TEST(GradientAccumulation, TwoMicroBatchesEqualOneBatchOfTwoUnderLamb) {
  check_accumulation(
      test::segmentation_model(), [] { return std::make_unique<Lamb>(LambOptions{}); }, 0.01);
}

// LARS and LARC measure their per-tensor norms on the gradient buffer after the window's sum has
// been averaged into it, so their trust ratios (which depend on the gradient's scale) are the
// big batch's.
TEST(GradientAccumulation, TwoMicroBatchesEqualOneBatchOfTwoUnderLarsAndLarc) {
  check_accumulation(
      test::branchy_model(),
      [] {
        return std::make_unique<Lars>(
            LarsOptions{.momentum = 0.9, .trust_coefficient = 0.01, .weight_decay = 1e-3});
      },
      0.5);
  check_accumulation(
      test::segmentation_model(),
      [] {
        return std::make_unique<Larc>(std::make_unique<Adam>(0.9, 0.999, 1e-8, 0.0, false),
                                      LarcOptions{.mode = LarcMode::clip, .weight_decay = 1e-3});
      },
      0.01);
}

// Three micro-batches: the middle one adds to the sum; the window restarts after the update.
TEST(GradientAccumulation, ThreeMicroBatchesAndResumeInTheMiddle) {
  const test::SmallModel m = test::branchy_model();
  auto backend = make_backend("reference");
  auto big = compile(m.graph, *backend, 3);
  auto small = compile(m.graph, *backend, 1);
  std::memcpy(small->params().values(), big->params().values(), big->params().bytes());
  SgdKeras whole(0.0), split(0.0);
  whole.attach(big->params(), big->vec(), 1);
  split.attach(small->params(), small->vec(), 3);
  TrainStep one(*big, whole, nullptr), three(*small, split, nullptr);
  fill_inputs(*big, m.graph, 5);
  one.run(0.1);
  copy_sample(*big, *small, 0);
  three.run(0.1);
  // A resumed run: a fresh TrainStep placed in the window by the micro-batches done so far (the
  // gradient sum is optimizer state, which a checkpoint restores).
  TrainStep resumed(*small, split, nullptr);
  resumed.set_micro_batches(1);
  copy_sample(*big, *small, 1);
  EXPECT_FALSE(resumed.run(0.1).updated);
  copy_sample(*big, *small, 2);
  EXPECT_TRUE(resumed.run(0.1).updated);
  EXPECT_LT(max_weight_difference(*big, *small), 1e-13);
}

TEST(GradientAccumulation, RefusesZeroMicroBatches) {
  auto backend = make_backend("reference");
  const test::SmallModel m = test::branchy_model();
  auto ex = compile(m.graph, *backend, 1);
  SgdKeras sgd(0.9);
  EXPECT_THROW(sgd.attach(ex->params(), ex->vec(), 0), Error);
}

}  // namespace
}  // namespace crest
