// Gradient lag in TrainStep (train.gradient_lag, crest/engine/train_step.hpp) on an analytic
// quadratic: a dense layer under the mean squared error, whose gradient the test computes in
// closed form from the weights each step started with. In float64 on the reference backend, plain
// SGD (w -= lr g): with the lag every update applies exactly the previous step's (or accumulation
// window's) averaged gradient (the first applies nothing), without it the step's own; both on one
// process and through a (fake) 2-rank exchange whose other rank contributes nothing, so the
// average is half this rank's gradient; under dynamic loss scaling (the scale growing every update)
// too; a lag that starts later (train.gradient_lag's start_epoch) applies each window's own
// gradient before its start window, nothing at it, and the previous window's after; with the
// local correction, the previous window's average less this rank's share of then plus its own
// gradient now. settle() leaves the lagged gradient, as checkpoints hold it, averaged (and, with
// the correction, the models averaged and the correction restarted).
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "crest/engine/train_step.hpp"
#include "crest/graph/graph.hpp"
#include "crest/layers/dense.hpp"
#include "crest/layers/loss.hpp"
#include "crest/optim/loss_scaler.hpp"
#include "crest/optim/optimizer.hpp"
#include "support/fake_communicator.hpp"
#include "support/test_util.hpp"

namespace crest {
namespace {

constexpr int64_t kBatch = 2, kIn = 4, kOut = 3;
constexpr double kLr = 0.1;

// x [batch, 4] -> dense(3) -> mse against y [batch, 3]: L = mean over batch x 3 of (W x + b - y)^2.
Graph quadratic() {
  Graph g;
  const ValueId x = g.input("x", Shape{kIn});
  const ValueId y = g.input("y", Shape{kOut});
  const ValueId p =
      g.add("fc", layers::dense(DenseOptions{kOut, true, Init::torch_default, 0.0}), {x});
  g.mark_output(p);
  g.set_loss(g.add("loss", layers::mse_loss(), {p, y}));
  return g;
}

// The weights and bias as one vector, [W (out x in, row-major), b], and the data of one step.
struct Point {
  std::vector<double> w;
};
struct Batch {
  std::vector<double> x, y;
};

// dL/dW[o][j] = 2 / (batch out) sum_n (p_no - y_no) x_nj, dL/db[o] = 2 / (batch out) sum_n (p_no -
// y_no), p = W x + b.
std::vector<double> gradient(const Point& at, const Batch& b) {
  std::vector<double> g(static_cast<size_t>(kOut * kIn + kOut), 0.0);
  const double scale = 2.0 / static_cast<double>(kBatch * kOut);
  for (int64_t n = 0; n < kBatch; ++n)
    for (int64_t o = 0; o < kOut; ++o) {
      double p = at.w[static_cast<size_t>(kOut * kIn + o)];
      for (int64_t j = 0; j < kIn; ++j)
        p += at.w[static_cast<size_t>(o * kIn + j)] * b.x[static_cast<size_t>(n * kIn + j)];
      const double e = scale * (p - b.y[static_cast<size_t>(n * kOut + o)]);
      for (int64_t j = 0; j < kIn; ++j)
        g[static_cast<size_t>(o * kIn + j)] += e * b.x[static_cast<size_t>(n * kIn + j)];
      g[static_cast<size_t>(kOut * kIn + o)] += e;
    }
  return g;
}

struct Training {
  Graph graph = quadratic();
  std::unique_ptr<Backend> backend = make_backend("reference");
  std::unique_ptr<Executor> ex;
  std::unique_ptr<Optimizer> opt = std::make_unique<SgdKeras>(0.0);
  std::unique_ptr<test::FakeCommunicator> comm;
  std::unique_ptr<GradientSync> sync;
  std::unique_ptr<TrainStep> step;

  // `scaler`: dynamic loss scaling (null: none).
  Training(bool lag, bool exchange, int accumulation = 1, LossScaler* scaler = nullptr) {
    CompileOptions c;
    c.batch = kBatch;
    c.seed = 5;
    c.dtype = DType::f64;
    ex = std::make_unique<Executor>(graph, *backend, c);
    opt->attach(ex->params(), ex->vec(), accumulation, lag);
    if (exchange) {
      comm = std::make_unique<test::FakeCommunicator>(0, 2);
      sync = std::make_unique<GradientSync>(*comm, ex->params(), ex->gradient_ready_order(), 1e-4,
                                            1e-4);
    }
    step = std::make_unique<TrainStep>(*ex, *opt, sync.get(), scaler);
  }

  // Slot 0 is fc's weight, slot 1 its bias (the layer's order).
  Point weights() const { return read(ex->params().values()); }
  Point read(const void* buffer) const {
    Point p;
    const ParamStore& params = ex->params();
    for (size_t s = 0; s < 2; ++s) {
      const auto* v = reinterpret_cast<const double*>(static_cast<const char*>(buffer) +
                                                      params.slots()[s].offset);
      p.w.insert(p.w.end(), v, v + params.slots()[s].count);
    }
    return p;
  }

  Batch feed(uint64_t k) {
    test::fill_uniform(ex->input("x"), 300 + k);
    test::fill_uniform(ex->input("y"), 400 + k, -0.5, 0.5);
    const TensorView x = ex->input("x"), y = ex->input("y");
    return {{x.as<double>(), x.as<double>() + x.numel()},
            {y.as<double>(), y.as<double>() + y.numel()}};
  }
};

void expect_near(const std::vector<double>& got, const std::vector<double>& want,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-13 * std::max(1.0, std::fabs(want[i])))
        << what << " [" << i << "]";
}

// Windows of k micro-batches (k = 1: every step updates): each micro-batch's gradient counts 1/k,
// and an update applies a whole window's average (a lagged one: the previous window's; with the
// local correction, the previous window's average less this rank's own gradient then plus its
// own now). The lag starts at window `start` (the windows before it are synchronous).
struct Expected {
  bool lag = false, exchange = false, corrected = false;
  int k = 1;
  LossScaler* scaler = nullptr;
  int64_t start = 0;
};

// What an update applies: `average` and `own` are this window's gradients (the exchange's
// average, this rank's own), `previous` and `own_previous` the last window's.
std::vector<double> corrected_update(const std::vector<double>& previous,
                                     const std::vector<double>& own_previous,
                                     const std::vector<double>& own) {
  std::vector<double> u(own.size());
  for (size_t i = 0; i < u.size(); ++i) u[i] = previous[i] - own_previous[i] + own[i];
  return u;
}

void expect_updates(const Expected& e) {
  Training t(e.lag, e.exchange, e.k, e.scaler);
  if (e.corrected) t.step->correct_lag_locally();
  t.step->set_lag_start_window(e.start);
  const double share = (e.exchange ? 0.5 : 1.0) / e.k;
  // This window's averaged gradient and this rank's own, the last window's of each.
  std::vector<double> window, own, previous, own_previous, corrected;
  int64_t updates = 0;
  for (uint64_t m = 0; m < 8; ++m) {
    const Batch b = t.feed(m);
    const Point before = t.weights();
    const StepResult r = t.step->run(kLr);
    const std::vector<double> g = gradient(before, b);
    window.resize(g.size(), 0.0);
    own.resize(g.size(), 0.0);
    for (size_t i = 0; i < g.size(); ++i) {
      window[i] += share * g[i];
      own[i] += g[i] / e.k;
    }
    const bool ends = (m + 1) % e.k == 0;
    const auto at = static_cast<int64_t>(m) / e.k;  // the window
    if (ends && e.corrected && at > e.start)
      corrected = corrected_update(previous, own_previous, own);
    const std::vector<double>* applied = !ends                    ? nullptr
                                         : !e.lag || at < e.start ? &window
                                         : at == e.start          ? (e.corrected ? &own : nullptr)
                                         : e.corrected            ? &corrected
                                                                  : &previous;
    EXPECT_EQ(r.updated, applied != nullptr) << "micro-batch " << m;
    std::vector<double> want = before.w;
    if (applied)
      for (size_t i = 0; i < want.size(); ++i) want[i] -= kLr * (*applied)[i];
    expect_near(t.weights().w, want, "weights after micro-batch " + std::to_string(m));
    updates += applied ? 1 : 0;
    if (ends) {
      previous = std::exchange(window, {});
      own_previous = std::exchange(own, {});
    }
  }
  EXPECT_EQ(t.opt->steps_taken(), updates);
  if (!e.lag) return;
  // What a checkpoint taken now holds: the last window's averaged gradient, not yet applied.
  const Point before = t.weights();
  t.step->settle();
  ASSERT_NE(t.opt->lagged_gradient(), nullptr);
  expect_near(t.read(t.opt->lagged_gradient()->data()).w, previous, "the lagged gradient");
  if (!e.corrected) return;
  // The ranks' models are averaged (the fake's other rank holds zeros: half of this one's).
  std::vector<double> averaged = before.w;
  for (double& w : averaged) w *= e.exchange ? 0.5 : 1.0;
  expect_near(t.weights().w, averaged, "the weights after settle()");
  // The correction restarts: the next update applies this rank's own gradient alone.
  std::vector<double> next(averaged.size(), 0.0);
  for (int j = 0; j < e.k; ++j) {
    const Batch b = t.feed(100 + static_cast<uint64_t>(j));
    const std::vector<double> g = gradient(t.weights(), b);
    for (size_t i = 0; i < g.size(); ++i) next[i] += g[i] / e.k;
    t.step->run(kLr);
  }
  for (size_t i = 0; i < next.size(); ++i) averaged[i] -= kLr * next[i];
  expect_near(t.weights().w, averaged, "the weights after the update that follows");
}

void expect_updates(bool lag, bool exchange, int k, LossScaler* scaler = nullptr,
                    int64_t start = 0) {
  expect_updates({.lag = lag, .exchange = exchange, .k = k, .scaler = scaler, .start = start});
}

TEST(GradientLag, EachUpdateAppliesThePreviousWindowsAveragedGradient) {
  for (const int k : {1, 2})
    for (const bool lag : {false, true})
      for (const bool exchange : {false, true}) {
        SCOPED_TRACE(std::string(lag ? "lag 1" : "lag 0") +
                     (exchange ? ", 2 ranks (the other adds nothing)" : ", one process") +
                     ", windows of " + std::to_string(k));
        expect_updates(lag, exchange, k);
      }
}

// Dynamic loss scaling, the scale doubling after every update: each lagged gradient goes aside
// unscaled by the scale its own step ran with, so every update is still the unscaled one.
TEST(GradientLag, UnderLossScalingEachUpdateStillAppliesThePreviousWindowsGradient) {
  for (const int k : {1, 2})
    for (const bool exchange : {false, true}) {
      SCOPED_TRACE(std::string(exchange ? "2 ranks" : "one process") + ", windows of " +
                   std::to_string(k));
      LossScalerOptions grows;
      grows.initial_scale = 1024;
      grows.growth_interval = 1;
      LossScaler scaler(grows);
      expect_updates(true, exchange, k, &scaler);
      EXPECT_GT(scaler.scale(), 1024) << "the scale did not change: the test shows nothing";
    }
}

// Windows 0 and 1 synchronous, window 2 the lag's first (nothing applied), then lagged: on one
// process and through the exchange, whose synchronous and lagged paths differ.
TEST(GradientLag, ALagStartingLaterIsSynchronousUntilItsWindow) {
  for (const int k : {1, 2})
    for (const bool exchange : {false, true}) {
      SCOPED_TRACE(std::string(exchange ? "2 ranks" : "one process") + ", windows of " +
                   std::to_string(k));
      expect_updates(true, exchange, k, nullptr, 2);
    }
}

// train.gradient_lag.correction: local (delayed gradient averaging): every update is the previous
// window's average less this rank's own gradient of then plus its own now (on one process: its
// own gradient, which is the synchronous update); the lag's first window applies the own gradient
// alone (there is no stale share to replace); under
// dynamic loss scaling the own gradients are unscaled as the average is; settle() averages the
// models and restarts the correction, so the next update is the own gradient alone.
TEST(GradientLag, TheLocalCorrectionPutsTheOwnGradientInPlaceOfItsStaleShare) {
  for (const int k : {1, 2})
    for (const bool exchange : {false, true})
      for (const bool scaled : {false, true}) {
        SCOPED_TRACE(std::string(exchange ? "2 ranks" : "one process") + ", windows of " +
                     std::to_string(k) + (scaled ? ", loss scaling" : ""));
        LossScalerOptions grows;
        grows.initial_scale = 1024;
        grows.growth_interval = 1;
        LossScaler scaler(grows);
        expect_updates({.lag = true,
                        .exchange = exchange,
                        .corrected = true,
                        .k = k,
                        .scaler = scaled ? &scaler : nullptr,
                        .start = 1});
        if (scaled) {
          EXPECT_GT(scaler.scale(), 1024) << "the scale did not change";
        }
      }
}

TEST(GradientLag, IsStateTheCheckpointHolds) {
  Training t(/*lag=*/true, /*exchange=*/false);
  std::vector<std::string> names;
  for (const auto& state : t.opt->state()) names.push_back(state.first);
  EXPECT_EQ(names, (std::vector<std::string>{"velocity", "lagged_gradient"}));
  Training plain(/*lag=*/false, /*exchange=*/false);
  EXPECT_EQ(plain.opt->lagged_gradient(), nullptr);
  EXPECT_EQ(plain.opt->state().size(), 1u);
}

}  // namespace
}  // namespace crest
