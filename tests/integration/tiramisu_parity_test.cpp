// The Tiramisu against its PyTorch peer (tests/fixtures/tiramisu_torch.py): two Adam steps of a
// three-block network from the same initial weights and batch, with the reference's weighted,
// scaled loss (tests/fixtures/make_tiramisu_parity.py made the expectations in float64). The
// tight check is float64 on the reference backend; the float32 oneDNN path is checked against
// crest's own float64 gradients.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "crest/data/safetensors.hpp"
#include "crest/engine/train_step.hpp"
#include "crest/graph/executor.hpp"
#include "crest/models/tiramisu.hpp"
#include "crest/optim/optimizer.hpp"
#include "support/hashed_init.hpp"
#include "support/parity_fixture.hpp"
#include "support/scoped_env.hpp"
#include "support/test_util.hpp"

namespace crest {
namespace {

// The fixture's settings (make_tiramisu_parity.py).
constexpr uint64_t kSeed = 61;
constexpr int64_t kHeight = 16, kWidth = 24, kBatch = 2, kChannels = 16, kClasses = 3;
constexpr double kLr = 0.001, kEps = 1e-8;

struct ParityRun {
  BuiltModel model;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Executor> ex;
};

// x is written channels-last (N, H, W, C), the hash indexed in NCHW order as torch reads it; the
// labels floor(3 u) per pixel.
void set_batch(Executor& ex) {
  const TensorView x = ex.input("x"), y = ex.input("y");
  for (int64_t i = 0; i < kBatch * kHeight * kWidth; ++i)
    y.as<int32_t>()[i] = static_cast<int32_t>(
        test::hashed_init::hash_uniform(kSeed, "y", static_cast<uint64_t>(i)) * kClasses);
  for (int64_t n = 0; n < kBatch; ++n)
    for (int64_t c = 0; c < kChannels; ++c)
      for (int64_t h = 0; h < kHeight; ++h)
        for (int64_t w = 0; w < kWidth; ++w) {
          const auto i = static_cast<uint64_t>(((n * kChannels + c) * kHeight + h) * kWidth + w);
          const double v = 2 * test::hashed_init::hash_uniform(kSeed, "x", i) - 1;
          const int64_t at = ((n * kHeight + h) * kWidth + w) * kChannels + c;
          if (x.dtype() == DType::f64)
            x.as<double>()[at] = v;
          else
            x.as<float>()[at] = static_cast<float>(v);
        }
}

ParityRun prepared_run(const std::string& backend, DType dtype) {
  ParityRun r;
  TiramisuOptions o;
  o.input_shape = {kHeight, kWidth, kChannels};
  o.n_classes = kClasses;
  o.blocks = {2, 2, 3};
  o.growth_rate = 4;
  o.initial_filters = 8;
  o.filter_size = 5;
  o.dropout = 0;  // dropout's masks are crest's own random stream
  r.model = build_tiramisu(o);
  r.backend = make_backend(backend);
  r.backend->set_threads(2);
  CompileOptions co;
  co.batch = kBatch;
  co.dtype = dtype;
  r.ex = std::make_unique<Executor>(r.model.graph, *r.backend, co);
  test::set_hashed_initial_values(r.model, r.ex->params(), kSeed);
  set_batch(*r.ex);
  return r;
}

// Every sampled outcome and both losses within 1e-10 relative.
TEST(TiramisuParity, TwoAdamStepsMatchFloat64PyTorchToOneInTenBillion) {
  const SafetensorsFile fx(test::source_path("tests/fixtures/tiramisu_parity.safetensors"));
  ParityRun r = prepared_run("reference", DType::f64);
  const test::ValuesByKey initial = test::values_by_reference_key(r.model, r.ex->params());
  Adam adam(0.9, 0.999, kEps, 0.0, /*decoupled=*/false);
  adam.attach(r.ex->params(), r.ex->vec());
  TrainStep step(*r.ex, adam, nullptr);
  const std::vector<double> losses = test::read_f64(fx, "loss");
  for (int i = 0; i < 2; ++i) {
    const double loss = step.run(kLr).loss;
    EXPECT_NEAR(loss, losses[i], 1e-10 * losses[i]) << "step " << i;
  }
  const test::ValuesByKey final_values = test::values_by_reference_key(r.model, r.ex->params());
  // 17 convolutions: the input, 7 in the down blocks, 2 down, 2 up, 4 in the up blocks, the output.
  EXPECT_EQ(test::expect_sampled_outcomes_match(fx, initial, final_values, 1e-10), 34);
}

test::ValuesByKey first_gradients(const std::string& backend, DType dtype, double* loss) {
  ParityRun r = prepared_run(backend, dtype);
  *loss = r.ex->forward(true);
  r.ex->backward();
  return test::gradients_by_reference_key(r.model, r.ex->params());
}

// The first forward and backward in float32 on oneDNN against crest's float64. No batch norm
// amplifies rounding here, so the bound is tight: a wrong padding, tap or concat offset is off
// by O(1) in some tensor. `label` names the run in the printed errors.
void expect_float32_onednn_gradients_match_float64(const std::string& label) {
  double exact_loss = 0, loss = 0;
  const test::ValuesByKey exact = first_gradients("reference", DType::f64, &exact_loss);
  const test::ValuesByKey dnn = first_gradients("onednn", DType::f32, &loss);
  std::string worst_key;
  const std::vector<double> errors = test::relative_errors(dnn, exact, &worst_key);
  std::printf("float32 oneDNN (%s) vs float64: loss %.3g, gradients median %.3g, worst %.3g (%s)\n",
              label.c_str(), std::abs(loss - exact_loss) / exact_loss, errors[errors.size() / 2],
              errors.back(), worst_key.c_str());
  EXPECT_NEAR(loss, exact_loss, 1e-5 * exact_loss) << label;
  EXPECT_LE(errors.back(), 1e-4) << label << ": " << worst_key;
}

TEST(TiramisuParity, Float32OnednnGradientsMatchFloat64) {
  CREST_SKIP_WITHOUT_BACKEND("onednn");
  expect_float32_onednn_gradients_match_float64("direct");
}

// The same with every 5x5 convolution on F(4x4, 5x5) Winograd (the fixture's maps are too small
// for the rule to take it): measured worst 4e-6 against 5e-7 direct, inside the same bound.
TEST(TiramisuParity, Float32WinogradGradientsMatchFloat64) {
  CREST_SKIP_WITHOUT_BACKEND("onednn");
  const test::ScopedEnv everywhere("CREST_WINOGRAD", "1");
  expect_float32_onednn_gradients_match_float64("Winograd");
}

}  // namespace
}  // namespace crest
