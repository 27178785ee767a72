// DeepCAM against PyTorch: two LAMB steps with warmup, batch norm in training mode and the
// class-weighted loss, from the same initial weights and batch (tests/fixtures/
// make_deepcam_parity.py made the expectations with the reference network in float64).
//
// The network's gradient at initialisation is chaotically sensitive to rounding (DEEPCAM.md:
// float32 and float64 PyTorch differ by 3-6 % per tensor), so the tight check is in float64 on
// the reference backend; the float32 oneDNN path is checked against crest's own float64 path
// with a tolerance measured below.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "crest/data/safetensors.hpp"
#include "crest/engine/train_step.hpp"
#include "crest/graph/executor.hpp"
#include "crest/models/deepcam.hpp"
#include "crest/optim/lamb.hpp"
#include "support/deepcam_parity_init.hpp"
#include "support/parity_fixture.hpp"
#include "support/test_util.hpp"

namespace crest {
namespace {

namespace dp = test::deepcam_parity;

constexpr double kLr = 0.002;  // warmup W=2 from base 0.004: base/2 on both steps

struct TrainedRun {
  BuiltModel model;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Executor> ex;
  std::vector<double> losses;
  test::ValuesByKey initial, final_values;  // by reference key
};

// x is written channels-last (N, H, W, C), as the graph input declares; labels int32 (N, H, W).
void set_batch(Executor& ex) {
  const TensorView x = ex.input("x"), y = ex.input("y");
  for (int64_t n = 0; n < dp::kBatch; ++n)
    for (int64_t h = 0; h < dp::kHeight; ++h)
      for (int64_t w = 0; w < dp::kWidth; ++w) {
        y.as<int32_t>()[(n * dp::kHeight + h) * dp::kWidth + w] = dp::label(n, h, w);
        for (int64_t c = 0; c < dp::kChannels; ++c) {
          const int64_t at = ((n * dp::kHeight + h) * dp::kWidth + w) * dp::kChannels + c;
          const double v = dp::input_value(n, c, h, w);
          if (x.dtype() == DType::f64)
            x.as<double>()[at] = v;
          else
            x.as<float>()[at] = static_cast<float>(v);
        }
      }
}

// The network at the fixture's size, compiled for training, with the fixture's weights and batch.
TrainedRun prepared_run(const std::string& backend, DType dtype) {
  TrainedRun r;
  DeepcamOptions o;
  o.input_shape = {dp::kHeight, dp::kWidth, dp::kChannels};
  r.model = build_deepcam(o);
  r.backend = make_backend(backend);
  r.backend->set_threads(2);
  CompileOptions co;
  co.batch = dp::kBatch;
  co.dtype = dtype;
  r.ex = std::make_unique<Executor>(r.model.graph, *r.backend, co);
  test::set_hashed_initial_values(r.model, r.ex->params(), dp::kSeed);
  set_batch(*r.ex);
  return r;
}

TrainedRun train_two_steps(const std::string& backend, DType dtype) {
  TrainedRun r = prepared_run(backend, dtype);
  r.initial = test::values_by_reference_key(r.model, r.ex->params());
  LambOptions lo;
  lo.weight_decay = 0.01;
  Lamb lamb(lo);
  lamb.attach(r.ex->params(), r.ex->vec());
  TrainStep step(*r.ex, lamb, nullptr);
  for (int i = 0; i < 2; ++i) r.losses.push_back(step.run(kLr).loss);
  r.final_values = test::values_by_reference_key(r.model, r.ex->params());
  return r;
}

const TrainedRun& float64_run() {
  static const TrainedRun r = train_two_steps("reference", DType::f64);
  return r;
}

TEST(DeepcamParity, TwoLambStepsMatchFloat64PytorchToOneInAMillion) {
  const SafetensorsFile fx(test::source_path("tests/fixtures/deepcam_parity.safetensors"));
  const TrainedRun& r = float64_run();
  const std::vector<double> losses = test::read_f64(fx, "loss");
  for (int i = 0; i < 2; ++i) EXPECT_NEAR(r.losses[i], losses[i], 1e-9 * losses[i]) << "step " << i;
  const int checked = test::expect_sampled_outcomes_match(fx, r.initial, r.final_values, 1e-6);
  EXPECT_EQ(checked, 529 - 76);
}

// The first forward and backward from the same weights and batch: float32 oneDNN against
// float64. (After a LAMB step the comparison means little: the first update is about
// lr * sign(g) per element, so rounding flips the update of every element whose gradient is near
// zero.)
struct FirstGradients {
  double loss = 0;
  std::map<std::string, std::vector<double>> grads;  // by reference key, trained only
};

FirstGradients first_gradients(const std::string& backend, DType dtype) {
  TrainedRun r = prepared_run(backend, dtype);
  FirstGradients g;
  g.loss = r.ex->forward(true);
  r.ex->backward();
  const ParamStore& p = r.ex->params();
  for (size_t i = 0; i < p.slots().size(); ++i) {
    if (!p.slots()[i].spec.trainable) continue;
    const TensorView v = p.grad(i);
    std::vector<double>& dst = g.grads[test::reference_name(r.model, p.slots()[i]).first];
    for (int64_t k = 0; k < v.numel(); ++k) dst.push_back(test::element(v, static_cast<size_t>(k)));
  }
  return g;
}

TEST(DeepcamParity, Float32OnednnGradientsFollowFloat64) {
  CREST_SKIP_WITHOUT_BACKEND("onednn");
  const FirstGradients exact = first_gradients("reference", DType::f64);
  const FirstGradients f32 = first_gradients("onednn", DType::f32);
  EXPECT_NEAR(f32.loss, exact.loss, 1e-6 * exact.loss);
  std::vector<double> errors;
  std::string worst_key;
  for (const auto& [key, want] : exact.grads) {
    const std::vector<double>& got = f32.grads.at(key);
    std::vector<double> d(want.size());
    for (size_t j = 0; j < want.size(); ++j) d[j] = got[j] - want[j];
    errors.push_back(test::norm(d) / test::norm(want));
    if (errors.back() >= *std::max_element(errors.begin(), errors.end())) worst_key = key;
  }
  std::sort(errors.begin(), errors.end());
  const double median = errors[errors.size() / 2], worst = errors.back();
  std::printf("float32 oneDNN vs float64 gradients: median %.3g, worst %.3g (%s)\n", median, worst,
              worst_key.c_str());
  // Measured on Zen 4 with 2 threads: median 0.0098, worst 0.017 (bn1's weight). Float32 PyTorch
  // against float64 PyTorch differs by 3-6 % per tensor at 96x144 (DEEPCAM.md); the bounds allow
  // about that much, and a wrong gradient (a missing term, a wrong layout) is off by O(1).
  EXPECT_LE(median, 0.03);
  EXPECT_LE(worst, 0.1) << worst_key;
}

}  // namespace
}  // namespace crest
