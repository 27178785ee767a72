// PyTorch parity (tests/fixtures/README.md): CosmoFlow at 32^3 (conv_size 4) from the same
// initial weights and batch as PyTorch, 3 Keras-form SGD steps with L2 on the hidden dense
// kernels. The loss before each step must agree to 1e-5 and the weight update (final - init)
// of every tensor to 1e-3 relative, on both backends.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "crest/data/safetensors.hpp"
#include "crest/engine/train_step.hpp"
#include "crest/graph/executor.hpp"
#include "crest/models/cosmoflow.hpp"
#include "crest/optim/optimizer.hpp"
#include "support/scoped_env.hpp"
#include "support/test_util.hpp"

namespace crest {
namespace {

double f64_at(const SafetensorsTensor& t, size_t i) {
  double v;
  std::memcpy(&v, t.data + i * 8, 8);
  return v;
}
float f32_at(const SafetensorsTensor& t, size_t i) {
  float v;
  std::memcpy(&v, t.data + i * 4, 4);
  return v;
}

// Runs the fixture; returns how many of the compiled ops run crest's Winograd convolution.
int run_parity(const std::string& backend_name) {
  SafetensorsFile fx(test::source_path("tests/fixtures/cosmoflow32_parity.safetensors"));
  CosmoFlowOptions o;
  o.input_shape = {32, 32, 32, 4};
  o.conv_size = 4;
  o.dropout = 0;
  o.l2 = 0.01;
  CosmoFlowModel m = build_cosmoflow(o);
  auto backend = make_backend(backend_name);
  CompileOptions c;
  c.batch = 4;
  Executor ex(m.graph, *backend, c);
  ParamStore& ps = ex.params();
  for (size_t s = 0; s < ps.slots().size(); ++s)
    fx.read_into("init." + ps.slots()[s].name, DType::f32, ps.slots()[s].shape, ps.value(s).data());
  fx.read_into("x", DType::f32, Shape{4, 32, 32, 32, 4}, ex.input("x").data());
  fx.read_into("y", DType::f32, Shape{4, 4}, ex.input("y").data());
  SgdKeras opt(0.9);
  opt.attach(ps, ex.vec());

  const SafetensorsTensor& loss = fx.at("loss");
  const SafetensorsTensor& output = fx.at("output");
  TrainStep train_step(ex, opt, nullptr);
  for (size_t step = 0; step < 3; ++step) {
    // The step's loss and prediction are the forward pass's, before this step's update.
    const double l = train_step.run(0.01).loss;
    EXPECT_NEAR(l, f64_at(loss, step), 1e-5 * std::abs(f64_at(loss, step)))
        << "loss before step " << step + 1;
    const TensorView pred = ex.output(m.prediction);
    for (size_t i = 0; i < 16; ++i)
      EXPECT_NEAR(pred.as<float>()[i], f64_at(output, step * 16 + i), 1e-5)
          << "output " << i << " step " << step + 1;
  }
  for (size_t s = 0; s < ps.slots().size(); ++s) {
    const std::string& name = ps.slots()[s].name;
    const SafetensorsTensor& init = fx.at("init." + name);
    const SafetensorsTensor& fin = fx.at("final." + name);
    double max_diff = 0, max_ref = 0;
    for (size_t i = 0; i < ps.slots()[s].count; ++i) {
      const double ref_update = static_cast<double>(f32_at(fin, i)) - f32_at(init, i);
      const double our_update = static_cast<double>(ps.value(s).as<float>()[i]) - f32_at(init, i);
      max_diff = std::max(max_diff, std::abs(our_update - ref_update));
      max_ref = std::max(max_ref, std::abs(ref_update));
    }
    EXPECT_GT(max_ref, 0) << name << " did not move in the fixture";
    if (max_ref == 0) continue;
    EXPECT_LE(max_diff / max_ref, 1e-3) << name << ": update differs from PyTorch";
  }
  int winograd = 0;
  for (const OpProfile& op : ex.profile())
    winograd += op.implementation.find("Winograd") != std::string::npos ? 1 : 0;
  return winograd;
}

TEST(PyTorchParity, CosmoFlow32OneDnn) {
  CREST_SKIP_WITHOUT_BACKEND("onednn");
  run_parity("onednn");
}

// The fixture's 4 to 64 channels are below the rule's floor, so the run above is direct; here
// every 3x3x3 convolution runs F(4x4x4, 3x3x3) (channel counts padded to a lane block), held to
// the same tolerances.
TEST(PyTorchParity, CosmoFlow32OneDnnWinograd) {
  CREST_SKIP_WITHOUT_BACKEND("onednn");
  const test::ScopedEnv everywhere("CREST_WINOGRAD", "1");
  EXPECT_EQ(run_parity("onednn"), 5) << "conv1 to conv5 should run Winograd";
}
TEST(PyTorchParity, CosmoFlow32Reference) { run_parity("reference"); }

}  // namespace
}  // namespace crest
