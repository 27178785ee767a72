// Dynamic loss scaling in TrainStep (crest/engine/train_step.hpp), float32 on the reference
// backend. Scaling by a power of two is exact, so a run with loss scaling and no overflow must
// equal the run without it bit for bit: the strongest check that S·dL is carried everywhere (the
// loss gradient, the L2 terms, accumulation) and 1/S taken out exactly once, wherever it folds in
// (a pass of its own, the window's 1/k, the 1/ranks of float32 and bf16 exchanges). An overflow
// skips the update without a trace (weights, optimizer state and step count as before) and halves
// the scale; a non-finite loss or an overflow at scale 1 stays train.on_nonfinite's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "crest/engine/train_step.hpp"
#include "crest/optim/lamb.hpp"
#include "crest/optim/loss_scaler.hpp"
#include "crest/optim/optimizer.hpp"
#include "support/fake_communicator.hpp"
#include "support/small_models.hpp"
#include "support/test_util.hpp"

namespace crest {
namespace {

using MakeOptimizer = std::function<std::unique_ptr<Optimizer>()>;

// How the gradients leave backward: on one process, or through a (fake) 2-rank exchange whose
// other rank contributes nothing, as float32 or bf16.
enum class Exchange { none, float32, bf16 };

// One training: a model compiled in float32, its optimizer, the exchange and the step.
struct Training {
  std::unique_ptr<Backend> backend = make_backend("reference");
  std::unique_ptr<Executor> ex;
  std::unique_ptr<Optimizer> opt;
  std::unique_ptr<test::FakeCommunicator> comm;
  std::unique_ptr<GradientSync> sync;
  std::unique_ptr<LossScaler> scaler;
  std::unique_ptr<TrainStep> step;

  Training(const test::SmallModel& m, const MakeOptimizer& make, int accumulation,
           Exchange exchange, std::optional<LossScalerOptions> scaling) {
    CompileOptions c;
    c.batch = 2;
    c.seed = 11;
    ex = std::make_unique<Executor>(m.graph, *backend, c);
    opt = make();
    opt->attach(ex->params(), ex->vec(), accumulation);
    if (exchange != Exchange::none) {
      comm = std::make_unique<test::FakeCommunicator>(0, 2);
      sync = std::make_unique<GradientSync>(
          *comm, ex->params(), ex->gradient_ready_order(), 1e-4, 1e-3,
          exchange == Exchange::bf16 ? GradientCompression::bf16 : GradientCompression::none);
    }
    if (scaling) scaler = std::make_unique<LossScaler>(*scaling);
    step = std::make_unique<TrainStep>(*ex, *opt, sync.get(), scaler.get());
  }

  // The inputs of micro-batch `i`: x uniform, y uniform (float targets) or class ids 0..2.
  void feed(const test::SmallModel& m, uint64_t i) {
    test::fill_uniform(ex->input("x"), 100 + i);
    const TensorView y = ex->input("y");
    if (m.graph.inputs().at(1).integer) {
      for (int64_t k = 0; k < y.numel(); ++k)
        y.as<int32_t>()[k] = static_cast<int32_t>((k * 7 + static_cast<int64_t>(i)) % 3);
    } else {
      test::fill_uniform(y, 200 + i, -0.9, 0.9);
    }
  }

  // Everything an update may change: the weights and every optimizer state buffer but the
  // accumulation window's partial sum, which carries the loss scale by design.
  std::vector<char> state() const {
    const char* w = static_cast<const char*>(ex->params().values());
    std::vector<char> out(w, w + ex->params().bytes());
    for (const auto& [name, buffer] : opt->state()) {
      if (name == "gradient_sum") continue;
      const char* b = static_cast<const char*>(buffer->data());
      out.insert(out.end(), b, b + buffer->bytes());
    }
    return out;
  }
};

LossScalerOptions scaling(double initial, int64_t interval) {
  return LossScalerOptions{.initial_scale = initial, .growth_interval = interval};
}

struct Case {
  std::string name;
  test::SmallModel model;
  MakeOptimizer optimizer;
};

std::vector<Case> cases() {
  return {{"branchy (mse, L2, dropout) under SGD", test::branchy_model(0.3f),
           [] { return std::make_unique<SgdKeras>(0.9); }},
          {"segmentation (softmax cross-entropy) under Adam", test::segmentation_model(),
           [] { return std::make_unique<Adam>(0.9, 0.999, 1e-8, 0.01, false); }},
          {"segmentation under LAMB", test::segmentation_model(),
           [] { return std::make_unique<Lamb>(LambOptions{}); }}};
}

// Six micro-batches, the scale doubling after every second update (1024, 2048, 4096).
TEST(LossScaling, APowerOfTwoScaleGivesTheBitsOfTheUnscaledRun) {
  for (const Case& c : cases())
    for (const int k : {1, 2})
      for (const Exchange e : {Exchange::none, Exchange::float32, Exchange::bf16}) {
        SCOPED_TRACE(c.name + ", accumulation " + std::to_string(k) + ", exchange " +
                     std::to_string(static_cast<int>(e)));
        Training plain(c.model, c.optimizer, k, e, std::nullopt);
        Training scaled(c.model, c.optimizer, k, e, scaling(1024, 2));
        for (uint64_t i = 0; i < 6; ++i) {
          plain.feed(c.model, i);
          scaled.feed(c.model, i);
          const StepResult a = plain.step->run(0.05), b = scaled.step->run(0.05);
          ASSERT_EQ(a.loss, b.loss) << "forward never sees the scale";
          ASSERT_FALSE(b.overflow);
          EXPECT_EQ(b.loss_scale, 1024 << (i / k / 2));
          ASSERT_TRUE(plain.state() == scaled.state()) << "micro-batch " << i;
        }
        EXPECT_EQ(scaled.opt->steps_taken(), 6 / k);
      }
}

// One clean update (so the optimizer state is not all zero), then an overflow on the next.
TEST(LossScaling, AnOverflowSkipsTheUpdateWithoutATraceAndHalvesTheScale) {
  const test::SmallModel m = test::branchy_model();
  Training run(
      m, [] { return std::make_unique<SgdKeras>(0.9); }, 1, Exchange::none, scaling(1024, 100));
  run.feed(m, 0);
  ASSERT_TRUE(run.step->run(0.05).finite);
  const std::vector<char> before = run.state();
  run.feed(m, 1);
  run.step->overflow_next_gradient();
  const StepResult r = run.step->run(0.05);
  EXPECT_TRUE(r.decided && r.updated);
  EXPECT_TRUE(r.overflow);
  EXPECT_TRUE(r.finite) << "an overflow is not a non-finite step";
  EXPECT_FALSE(r.nonfinite_loss);
  EXPECT_EQ(r.loss_scale, 1024);
  EXPECT_EQ(run.scaler->scale(), 512);
  EXPECT_TRUE(run.state() == before) << "weights and optimizer state must not move";
  EXPECT_EQ(run.opt->steps_taken(), 1);
  // The next step is clean and updates at the lower scale.
  run.feed(m, 2);
  const StepResult next = run.step->run(0.05);
  EXPECT_FALSE(next.overflow);
  EXPECT_EQ(next.loss_scale, 512);
  EXPECT_FALSE(run.state() == before);
  EXPECT_EQ(run.opt->steps_taken(), 2);
}

// With accumulation the infinity enters the first micro-batch's gradient; the check runs once,
// on the window's sum at its update. A run that skips the window equals one that never saw it:
// the partial sum does not leak into the next window (and the halved scale changes no bit).
TEST(LossScaling, AnOverflowInsideAnAccumulationWindowSkipsTheWholeWindow) {
  const test::SmallModel m = test::branchy_model();
  const MakeOptimizer adam = [] { return std::make_unique<Adam>(0.9, 0.999, 1e-8, 0, false); };
  Training skipped(m, adam, 2, Exchange::float32, scaling(1024, 100));
  Training without(m, adam, 2, Exchange::float32, scaling(1024, 100));
  for (uint64_t i : {0, 1}) {
    skipped.feed(m, i);
    without.feed(m, i);
    skipped.step->run(0.01);
    without.step->run(0.01);
  }
  skipped.feed(m, 2);
  skipped.step->overflow_next_gradient();
  const StepResult first = skipped.step->run(0.01);
  EXPECT_FALSE(first.decided || first.overflow) << "no check before the window's update";
  skipped.feed(m, 3);
  const StepResult second = skipped.step->run(0.01);
  EXPECT_TRUE(second.overflow);
  EXPECT_EQ(skipped.scaler->scale(), 512);
  for (uint64_t i : {4, 5}) {
    skipped.feed(m, i);
    without.feed(m, i);
    EXPECT_FALSE(skipped.step->run(0.01).overflow);
    without.step->run(0.01);
  }
  EXPECT_EQ(skipped.opt->steps_taken(), 2);
  EXPECT_TRUE(skipped.state() == without.state());
}

TEST(LossScaling, ANonFiniteLossIsNotAnOverflow) {
  const test::SmallModel m = test::branchy_model();
  Training run(
      m, [] { return std::make_unique<SgdKeras>(0.9); }, 1, Exchange::none, scaling(1024, 100));
  run.feed(m, 0);
  run.ex->input("x").as<float>()[0] = std::numeric_limits<float>::quiet_NaN();
  const std::vector<char> before = run.state();
  const StepResult r = run.step->run(0.05);
  EXPECT_FALSE(r.finite);
  EXPECT_TRUE(r.nonfinite_loss);
  EXPECT_FALSE(r.overflow);
  EXPECT_EQ(run.scaler->scale(), 1024) << "forward never sees the scale: nothing to back off";
  EXPECT_TRUE(run.state() == before);
}

TEST(LossScaling, AnOverflowAtScaleOneIsANonFiniteStep) {
  const test::SmallModel m = test::branchy_model();
  Training run(
      m, [] { return std::make_unique<SgdKeras>(0.9); }, 1, Exchange::none, scaling(1, 100));
  run.feed(m, 0);
  run.step->overflow_next_gradient();
  const StepResult r = run.step->run(0.05);
  EXPECT_FALSE(r.finite);
  EXPECT_FALSE(r.overflow);
  EXPECT_FALSE(r.nonfinite_loss);
  EXPECT_EQ(run.scaler->scale(), 1);
}

// Without a scaler the same fault is a non-finite step, as before loss scaling existed.
TEST(LossScaling, WithoutAScalerAnInfiniteGradientIsANonFiniteStep) {
  const test::SmallModel m = test::branchy_model();
  Training run(
      m, [] { return std::make_unique<SgdKeras>(0.9); }, 1, Exchange::none, std::nullopt);
  run.feed(m, 0);
  run.step->overflow_next_gradient();
  const StepResult r = run.step->run(0.05);
  EXPECT_FALSE(r.finite);
  EXPECT_FALSE(r.overflow);
  EXPECT_EQ(r.loss_scale, 0);
}

}  // namespace
}  // namespace crest
