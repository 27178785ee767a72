// Batch normalisation beyond the op table's gradient check and backend agreement: the parameter
// layout PyTorch's checkpoints need, the running-statistics update against hand-computed values,
// evaluation with the running statistics, the fused ReLU, and synchronised batch norm (2 ranks x
// batch 1 = 1 rank x batch 2); each in float32, float64 and bf16 (mixed precision, statistics in
// float32), and that a bf16 conv -> batch norm -> ReLU -> conv block converts nothing around the
// batch norm.
#include "crest/layers/batch_norm.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "crest/core/error.hpp"
#include "crest/graph/executor.hpp"
#include "crest/graph/graph_yaml.hpp"
#include "crest/layers/activation.hpp"
#include "crest/layers/conv.hpp"
#include "crest/layers/loss.hpp"
#include "support/alloc_counter.hpp"
#include "support/host_backends.hpp"
#include "support/lockstep_reducer.hpp"
#include "support/test_util.hpp"

namespace crest {
namespace {

constexpr double kEps = 1e-5;

double at(const TensorView& t, int64_t i) { return test::element(t, static_cast<size_t>(i)); }

void put(const TensorView& t, const std::vector<double>& v) {
  ASSERT_EQ(static_cast<size_t>(t.numel()), v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    if (t.dtype() == DType::f64)
      t.as<double>()[i] = v[i];
    else
      t.as<float>()[i] = static_cast<float>(v[i]);
  }
}

// Slot index of "<node>.<param>"; fails the test when it is missing.
size_t slot(const Executor& ex, const std::string& name) {
  const int s = ex.params().find(name);
  EXPECT_GE(s, 0) << name;
  return static_cast<size_t>(std::max(s, 0));
}

std::vector<double> values(const TensorView& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = test::element(t, i);
  return v;
}

// The backends and dtypes a numeric test runs on: the reference in f64 and f32, every other
// built backend in f32, and every backend that runs bf16 under mixed precision (the reference
// emulates it): the batch norm then reads and writes bf16 while its statistics stay float32.
struct Target {
  std::string backend;
  DType dtype;
  double tol;                      // statistics and values computed in the compile dtype
  std::optional<DType> half = {};  // CompileOptions::half
  double out_tol = 10 * tol;       // values stored in the node's dtype (bf16 rounds to 2^-9)

  std::string name() const { return backend + " " + dtype_name(half ? *half : dtype); }
  CompileOptions options(int64_t batch) const {
    CompileOptions o;
    o.batch = batch;
    o.dtype = dtype;
    o.half = half;
    return o;
  }
};
std::vector<Target> targets() {
  std::vector<Target> t{{"reference", DType::f64, 1e-12}, {"reference", DType::f32, 2e-6}};
  for (const std::string& b : crest::test::host_backend_names())
    if (b != "reference") t.push_back({b, DType::f32, 2e-6});
  for (const std::string& b : crest::test::host_backend_names())
    if (make_backend(b)->supports_dtype(DType::bf16))
      t.push_back({b, DType::f32, 2e-6, DType::bf16, 1e-2});
  return t;
}

// x [2 channels, 3] -> bn (marked output), no loss.
Graph single_bn_graph() {
  Graph g;
  const ValueId x = g.input("x", Shape{2, 3});
  g.mark_output(g.add("bn", layers::batch_norm(), {x}));
  return g;
}

// Batch of 2, channel 0: {1,2,3}, {4,5,6} (mean 3.5, squared deviations 17.5);
// channel 1: {0,0,0}, {0,0,6} (mean 1, squared deviations 30).
const std::vector<double> kX = {1, 2, 3, 0, 0, 0, 4, 5, 6, 0, 0, 6};
const double kMean[2] = {3.5, 1.0};
const double kSquaredDeviations[2] = {17.5, 30.0};
const double kWeight[2] = {2.0, 0.5}, kBias[2] = {0.1, -1.0};

TEST(BatchNormLayer, ParametersArePyTorchsStateDictInOrder) {
  Graph g;
  g.add("bn", layers::batch_norm(), {g.input("x", Shape{4, 3, 3})});
  auto backend = make_backend("reference");
  Executor ex(g, *backend, CompileOptions{});
  // Trainable slots come first in the store; the node's own order is PyTorch's.
  const char* names[] = {"weight", "bias", "running_mean", "running_var", "num_batches_tracked"};
  const bool trainable[] = {true, true, false, false, false};
  const bool eval_stat[] = {false, false, true, true, false};
  const double initial[] = {1, 0, 0, 1, 0};
  for (int k = 0; k < 5; ++k) {
    const size_t s = slot(ex, std::string("bn.") + names[k]);
    const ParamSlot& p = ex.params().slots()[s];
    EXPECT_EQ(p.shape, k == 4 ? Shape{1} : Shape{4}) << names[k];
    EXPECT_EQ(p.spec.trainable, trainable[k]) << names[k];
    EXPECT_EQ(p.spec.eval_stat, eval_stat[k]) << names[k];
    for (double v : values(ex.params().value(s))) EXPECT_EQ(v, initial[k]) << names[k];
  }
  EXPECT_EQ(ex.params().parameter_count(), 8) << "only weight and bias are trained";
  EXPECT_EQ(ex.gradient_ready_order().size(), 2u) << "no gradient is handed on for the state";
  EXPECT_NE(ex.summary().find("parameters: 8 and 9 values of non-trained state"), std::string::npos)
      << ex.summary();
}

TEST(BatchNormLayer, BuilderAndYamlGiveTheSameNode) {
  const Graph from_yaml = graph_from_yaml(YAML::Load(R"(
inputs: [{name: x, shape: [4, 3, 3]}]
layers: [{name: bn, kind: batch_norm, momentum: 0.2, eps: 0.001, inputs: [x]}]
outputs: [bn]
)"),
                                          "test");
  Graph built;
  built.mark_output(
      built.add("bn", layers::batch_norm({0.2, 0.001}), {built.input("x", Shape{4, 3, 3})}));
  EXPECT_EQ(from_yaml, built);
  EXPECT_EQ(layers::batch_norm().attrs, layers::batch_norm({0.1, 1e-5}).attrs);
}

TEST(BatchNormLayer, TrainingForwardNormalisesAndUpdatesRunningStatisticsAsPyTorch) {
  const Graph g = single_bn_graph();
  for (const Target& t : targets()) {
    SCOPED_TRACE(t.name());
    auto backend = make_backend(t.backend);
    Executor ex(g, *backend, t.options(2));
    put(ex.input("x"), kX);
    put(ex.params().value(slot(ex, "bn.weight")), {kWeight[0], kWeight[1]});
    put(ex.params().value(slot(ex, "bn.bias")), {kBias[0], kBias[1]});
    ex.forward();
    const TensorView y = ex.output(g.output_of("bn"));
    for (int64_t i = 0; i < 12; ++i) {
      const int c = static_cast<int>(i / 3 % 2);
      const double var = kSquaredDeviations[c] / 6;  // biased: over n = 2 x 3
      const double want =
          (kX[static_cast<size_t>(i)] - kMean[c]) / std::sqrt(var + kEps) * kWeight[c] + kBias[c];
      EXPECT_NEAR(at(y, i), want, t.out_tol) << "y[" << i << "]";
    }
    // running = 0.9 running + 0.1 batch, with the unbiased variance (n - 1 = 5).
    std::vector<double> mean{0.1 * 3.5, 0.1 * 1.0}, var{0.9 + 0.1 * 3.5, 0.9 + 0.1 * 6.0};
    auto expect_state = [&](double count) {
      const auto m = values(ex.params().value(slot(ex, "bn.running_mean")));
      const auto v = values(ex.params().value(slot(ex, "bn.running_var")));
      for (int c = 0; c < 2; ++c) {
        EXPECT_NEAR(m[static_cast<size_t>(c)], mean[static_cast<size_t>(c)], t.tol) << c;
        EXPECT_NEAR(v[static_cast<size_t>(c)], var[static_cast<size_t>(c)], t.tol) << c;
      }
      EXPECT_EQ(values(ex.params().value(slot(ex, "bn.num_batches_tracked")))[0], count);
    };
    expect_state(1);
    ex.forward();  // the same batch again: the blend applies to the updated estimates
    for (int c = 0; c < 2; ++c) {
      mean[static_cast<size_t>(c)] = 0.9 * mean[static_cast<size_t>(c)] + 0.1 * kMean[c];
      var[static_cast<size_t>(c)] =
          0.9 * var[static_cast<size_t>(c)] + 0.1 * kSquaredDeviations[c] / 5;
    }
    expect_state(2);
  }
}

TEST(BatchNormLayer, EvalUsesRunningStatisticsAndChangesNothing) {
  const Graph g = single_bn_graph();
  const double running_mean[2] = {0.5, -1.0}, running_var[2] = {4.0, 0.25};
  for (const Target& t : targets()) {
    SCOPED_TRACE(t.name());
    auto backend = make_backend(t.backend);
    for (bool compiled_for_training : {true, false}) {
      CompileOptions o = t.options(2);
      o.training = compiled_for_training;
      Executor ex(g, *backend, o);
      put(ex.input("x"), kX);
      put(ex.params().value(slot(ex, "bn.weight")), {kWeight[0], kWeight[1]});
      put(ex.params().value(slot(ex, "bn.bias")), {kBias[0], kBias[1]});
      put(ex.params().value(slot(ex, "bn.running_mean")), {running_mean[0], running_mean[1]});
      put(ex.params().value(slot(ex, "bn.running_var")), {running_var[0], running_var[1]});
      const auto* p = static_cast<const char*>(ex.params().values());
      const std::vector<char> before(p, p + ex.params().bytes());
      ex.forward(/*training=*/false);
      const TensorView y = ex.output(g.output_of("bn"));
      for (int64_t i = 0; i < 12; ++i) {
        const int c = static_cast<int>(i / 3 % 2);
        const double want = (kX[static_cast<size_t>(i)] - running_mean[c]) /
                                std::sqrt(running_var[c] + kEps) * kWeight[c] +
                            kBias[c];
        EXPECT_NEAR(at(y, i), want, t.out_tol) << "y[" << i << "]";
      }
      EXPECT_EQ(std::memcmp(ex.params().values(), before.data(), before.size()), 0)
          << "an evaluation forward updated the parameters or the running statistics";
    }
  }
}

// Evaluation in bf16 against the reference backend's float32, 2-D and 3-D, plain and (16
// channels) blocked on oneDNN, with running statistics away from 0 and 1; compiled for training
// (an evaluation forward between steps) and for inference.
TEST(BatchNormLayer, Bf16EvaluationAgreesWithFloat32) {
  const std::vector<Shape> shapes{Shape{3, 5, 4}, Shape{16, 5, 6}, Shape{2, 3, 4, 3},
                                  Shape{16, 3, 2, 4}};
  auto reference = make_backend("reference");
  int checked = 0;
  for (const Shape& shape : shapes) {
    Graph g;
    g.mark_output(g.add("bn", layers::batch_norm(), {g.input("x", shape)}));
    const int64_t channels = shape[0];
    auto prepare = [&](Executor& ex) {
      std::vector<double> x(static_cast<size_t>(ex.input("x").numel()));
      for (size_t i = 0; i < x.size(); ++i) x[i] = 2 * std::sin(0.37 * static_cast<double>(i));
      put(ex.input("x"), x);
      std::vector<double> w, b, mean, var;
      for (int64_t c = 0; c < channels; ++c) {
        const auto k = static_cast<double>(c);
        w.push_back(0.5 + 0.1 * k);
        b.push_back(0.3 - 0.05 * k);
        mean.push_back(0.2 * std::cos(k));
        var.push_back(0.5 + 0.2 * k);
      }
      put(ex.params().value(slot(ex, "bn.weight")), w);
      put(ex.params().value(slot(ex, "bn.bias")), b);
      put(ex.params().value(slot(ex, "bn.running_mean")), mean);
      put(ex.params().value(slot(ex, "bn.running_var")), var);
    };
    Executor want(g, *reference, Target{"reference", DType::f32, 0}.options(2));
    prepare(want);
    want.forward(false);
    for (const Target& t : targets()) {
      if (!t.half) continue;
      auto backend = make_backend(t.backend);
      for (bool compiled_for_training : {true, false}) {
        SCOPED_TRACE(t.name() + " " + shape.str() + (compiled_for_training ? " train" : " eval"));
        CompileOptions o = t.options(2);
        o.training = compiled_for_training;
        Executor ex(g, *backend, o);
        prepare(ex);
        ex.forward(false);
        const ValueId y = g.output_of("bn");
        EXPECT_LT(test::rel_distance(ex.output(y), want.output(y)), t.out_tol);
        EXPECT_GT(test::rel_distance(ex.output(y), ex.input("x")), 0.1) << "normalised at all";
        EXPECT_NE(ex.summary().find(" bf16 "), std::string::npos) << ex.summary();
        ++checked;
      }
    }
  }
  EXPECT_GE(checked, 8) << "the reference backend emulates bf16";
}

TEST(BatchNormLayer, ErrorsNameTheProblem) {
  auto node = [](const std::string& attrs, const std::string& shape) {
    return graph_from_yaml(YAML::Load("inputs: [{name: x, shape: " + shape +
                                      "}]\nlayers: [{name: bn, kind: batch_norm, " + attrs +
                                      "inputs: [x]}]\noutputs: [bn]\n"),
                           "test");
  };
  auto message = [](const std::function<void()>& f) -> std::string {
    try {
      f();
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(message([&] { node("momentum: 1.5, ", "[4, 3]"); }).find("momentum"),
            std::string::npos);
  EXPECT_NE(message([&] { node("eps: 0, ", "[4, 3]"); }).find("eps"), std::string::npos);
  auto backend = make_backend("reference");
  const std::string rank = message([&] { Executor(node("", "[4]"), *backend, CompileOptions{}); });
  EXPECT_NE(rank.find("'bn'"), std::string::npos) << rank;
  EXPECT_NE(rank.find("[N, C, spatial...]"), std::string::npos) << rank;
  // One value per channel: PyTorch refuses to train on it (the unbiased variance divides by 0).
  Executor single(node("", "[4, 1]"), *backend, CompileOptions{});
  const std::string one = message([&] { single.forward(); });
  EXPECT_NE(one.find("more than one value per channel"), std::string::npos) << one;
}

// in [16, 5, 6] -> conv 3x3 (16) -> bn -> relu -> conv 1x1 (4) -> mse against target. With 16
// channels oneDNN keeps the convolution's blocked layout through the batch norm.
Graph conv_bn_relu_graph() {
  Graph g;
  const ValueId x = g.input("x", Shape{16, 5, 6});
  const ValueId target = g.input("target", Shape{4, 5, 6});
  ConvOptions c1;
  c1.out_channels = 16;
  c1.kernel = {3, 3};
  c1.padding = {1};
  c1.bias = false;
  ValueId t = g.add("conv1", layers::conv(c1), {x});
  t = g.add("bn", layers::batch_norm(), {t});
  t = g.add("relu", layers::relu(), {t});
  ConvOptions c2;
  c2.out_channels = 4;
  c2.kernel = {1, 1};
  const ValueId out = g.add("conv2", layers::conv(c2), {t});
  g.mark_output(out);
  g.set_loss(g.add("loss", layers::mse_loss(), {out, target}));
  return g;
}

// Everything a step produces, for comparisons.
struct StepResult {
  double loss = 0;
  std::vector<double> output, input_grad, eval_output;
  std::vector<std::vector<double>> grads, state;  // per slot
};

StepResult read_step(const Executor& ex, const Graph& g, double loss) {
  StepResult r;
  r.loss = loss;
  r.output = values(ex.output(g.outputs()[0]));
  if (ex.options().input_grads) r.input_grad = values(ex.input_grad("x"));
  for (size_t s = 0; s < ex.params().slots().size(); ++s) {
    r.grads.push_back(values(ex.params().grad(s)));
    r.state.push_back(values(ex.params().value(s)));
  }
  return r;
}

// Inputs, targets and the batch norm's weight and bias: smooth pseudo-random values, per sample
// so that a rank holding sample k of a larger batch sees the same numbers.
void fill_sample(Executor& ex, int64_t first_sample) {
  for (const char* name : {"x", "target"}) {
    const TensorView t = ex.input(name);
    const int64_t per = t.numel() / t.shape()[0];
    std::vector<double> v(static_cast<size_t>(t.numel()));
    for (size_t i = 0; i < v.size(); ++i) {
      const auto k = static_cast<double>(static_cast<int64_t>(i) + first_sample * per);
      v[i] = std::sin(0.7 * k + (name[0] == 'x' ? 0.0 : 1.0)) + 0.3 * std::cos(0.13 * k);
    }
    put(t, v);
  }
  std::vector<double> w(16), b(16);
  for (size_t c = 0; c < 16; ++c) {
    w[c] = 0.5 + 0.1 * static_cast<double>(c);
    b[c] = 0.05 * static_cast<double>(c) - 0.4;
  }
  put(ex.params().value(slot(ex, "bn.weight")), w);
  put(ex.params().value(slot(ex, "bn.bias")), b);
}

double max_difference(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

void expect_near(const std::vector<double>& got, const std::vector<double>& want, double tol,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 0;
  for (double w : want) scale = std::max(scale, std::abs(w));
  EXPECT_LE(max_difference(got, want), tol * (1 + scale)) << what;
}

TEST(BatchNormLayer, FusedReluEqualsUnfusedAndIsReallyFused) {
  const Graph g = conv_bn_relu_graph();
  for (const Target& t : targets()) {
    SCOPED_TRACE(t.name());
    auto backend = make_backend(t.backend);
    StepResult results[2];
    for (bool fuse : {true, false}) {
      CompileOptions o = t.options(2);
      o.fuse = fuse;
      o.seed = 3;
      Executor ex(g, *backend, o);
      fill_sample(ex, 0);
      const double loss = ex.forward();
      ex.backward();
      results[fuse ? 0 : 1] = read_step(ex, g, loss);
      const std::string summary = ex.summary();
      EXPECT_EQ(summary.find("(fused)") != std::string::npos, fuse) << summary;
      EXPECT_EQ(summary.find("+fused act") != std::string::npos, fuse) << summary;
      if (t.backend == "onednn") {  // batch norm runs on the convolution's layout, unconverted
        EXPECT_EQ(summary.find("\nconv1>"), std::string::npos) << summary;
        // ... and applies the ReLU's backward too (compile/fuse_activation_backward.cpp).
        EXPECT_EQ(summary.find("backward too") != std::string::npos, fuse) << summary;
      }
      // Evaluation (running statistics) applies the fused ReLU too.
      ex.forward(false);
      results[fuse ? 0 : 1].eval_output = values(ex.output(g.outputs()[0]));
    }
    const StepResult &fused = results[0], &plain = results[1];
    // In bf16 the two paths may round a value to neighbouring bf16 numbers.
    const double tol = t.half ? t.out_tol : 1e-6;
    EXPECT_NEAR(fused.loss, plain.loss, tol * (1 + std::abs(plain.loss)));
    expect_near(fused.output, plain.output, tol, "output");
    expect_near(fused.eval_output, plain.eval_output, tol, "evaluation output");
    for (size_t s = 0; s < plain.grads.size(); ++s) {
      expect_near(fused.grads[s], plain.grads[s], tol, "gradient of slot " + std::to_string(s));
      expect_near(fused.state[s], plain.state[s], tol, "value of slot " + std::to_string(s));
    }
  }
}

TEST(BatchNormLayer, StepsAllocateNoTensorMemory) {
  const Graph g = conv_bn_relu_graph();
  for (const Target& t : targets()) {
    if (t.dtype != DType::f32) continue;
    const std::string& name = t.backend;
    SCOPED_TRACE(t.name());
    auto backend = make_backend(name);
    Executor ex(g, *backend, t.options(2));
    fill_sample(ex, 0);
    auto step = [&] {
      ex.forward();
      ex.backward();
      ex.forward(false);
    };
    step();  // warm-up: lazy initialisation inside libraries happens once
    test::AllocationStats s;
    {
      test::AllocationCounter counter;
      step();
      s = counter.stats();
    }
    if (name == "reference")
      EXPECT_EQ(s.count, 0u) << "a step allocated " << s.bytes << " bytes";
    else  // oneDNN's execute() builds small argument maps; nothing tensor-sized
      EXPECT_LT(s.largest, 4096u) << "an allocation of " << s.largest << " bytes inside a step";
  }
}

// The summary lines of the reorders the compile step inserted ("<value>>reorder", "<value>>plain").
std::vector<std::string> reorder_lines(const std::string& summary) {
  std::vector<std::string> found;
  std::istringstream lines(summary);
  for (std::string line; std::getline(lines, line);)
    if (line.find(">reorder ") != std::string::npos || line.find(">plain ") != std::string::npos)
      found.push_back(line);
  return found;
}

// DeepCAM's block in bf16: the batch norm reads the convolution's bf16 output as it is (on oneDNN
// in the convolution's blocked layout), fuses the ReLU, and the next convolution reads its bf16
// output; the only conversions are at the graph's float32 boundary (input, loss, output).
TEST(BatchNormLayer, Bf16BlockConvertsNothingAroundTheBatchNorm) {
  const Graph g = conv_bn_relu_graph();
  int checked = 0;
  for (const Target& t : targets()) {
    if (!t.half) continue;
    SCOPED_TRACE(t.name());
    auto backend = make_backend(t.backend);
    Executor ex(g, *backend, t.options(2));
    const std::string summary = ex.summary();
    for (const std::string& line : reorder_lines(summary)) {
      EXPECT_NE(line.rfind("conv1>", 0), 0u) << "a conversion after conv1:\n" << summary;
      EXPECT_NE(line.rfind("bn>", 0), 0u) << "a conversion after the batch norm:\n" << summary;
      EXPECT_NE(line.rfind("relu>", 0), 0u) << "a conversion after the ReLU:\n" << summary;
    }
    std::istringstream lines(summary);
    std::string conv, bn;
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("conv1 ", 0) == 0) conv = line;
      if (line.rfind("bn ", 0) == 0) bn = line;
    }
    EXPECT_NE(bn.find(" bf16 "), std::string::npos) << "the batch norm stores bf16\n" << summary;
    EXPECT_NE(bn.find("+fused act"), std::string::npos) << summary;
    if (t.backend == "onednn") {  // the convolution's layout, kept: blocked, or on AMX
      // channels-last (oneDNN's AMX kernels keep bf16 activations so)
      EXPECT_EQ(test::layout_named_in(bn), test::layout_named_in(conv)) << summary;
      EXPECT_TRUE(test::names_blocked_channels(bn) || test::layout_named_in(bn) == "channels_last")
          << summary;
    }
    ++checked;
  }
  EXPECT_GE(checked, 1) << "the reference backend emulates bf16";
}

// One training step of `g` at batch `batch` on every rank of `group` at once (one thread each),
// rank r holding samples r*batch.. of the whole batch; null group: one rank alone.
std::vector<StepResult> step_ranks(const Graph& g, const Target& t, int ranks, int64_t batch,
                                   test::LockstepGroup* group) {
  std::vector<std::unique_ptr<Backend>> backends;
  std::vector<std::unique_ptr<Executor>> executors;
  CompileOptions o = t.options(batch);
  o.input_grads = true;
  o.seed = 11;
  for (int r = 0; r < ranks; ++r) {
    backends.push_back(make_backend(t.backend));
    executors.push_back(std::make_unique<Executor>(g, *backends.back(), o));
    fill_sample(*executors.back(), r * batch);
    if (group) executors.back()->set_batch_stat_reducer(&group->rank(r));
  }
  std::vector<StepResult> results(static_cast<size_t>(ranks));
  auto step = [&](int r) {
    Executor& ex = *executors[static_cast<size_t>(r)];
    const double loss = ex.forward();
    ex.backward();
    results[static_cast<size_t>(r)] = read_step(ex, g, loss);
  };
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) threads.emplace_back(step, r);
  for (auto& th : threads) th.join();
  return results;
}

std::vector<double> part(const std::vector<double>& v, int k, int parts) {
  const size_t n = v.size() / static_cast<size_t>(parts);
  return {v.begin() + static_cast<std::ptrdiff_t>(n * static_cast<size_t>(k)),
          v.begin() + static_cast<std::ptrdiff_t>(n * static_cast<size_t>(k + 1))};
}

std::vector<double> scaled(std::vector<double> v, double s) {
  for (double& x : v) x *= s;
  return v;
}

TEST(SyncBatchNorm, TwoRanksOfBatchOneEqualOneRankOfBatchTwo) {
  const Graph g = conv_bn_relu_graph();
  for (const Target& t : targets()) {
    SCOPED_TRACE(t.name());
    // bf16: the group's and the whole batch's statistics differ in float32 rounding, which can
    // move a stored value to the neighbouring bf16 number.
    const double tol = t.half ? 2e-2 : t.dtype == DType::f64 ? 1e-10 : 1e-4;
    const StepResult whole = step_ranks(g, t, 1, 2, nullptr)[0];
    test::LockstepGroup group(2);
    const std::vector<StepResult> ranks = step_ranks(g, t, 2, 1, &group);
    EXPECT_EQ(group.calls(), 3) << "two sums in the forward, one in the backward";
    for (int r = 0; r < 2; ++r) {
      const StepResult& mine = ranks[static_cast<size_t>(r)];
      expect_near(mine.output, part(whole.output, r, 2), tol,
                  "output of rank " + std::to_string(r));
      // Each rank's loss is a mean over its own sample: twice the whole batch's gradient.
      expect_near(mine.input_grad, scaled(part(whole.input_grad, r, 2), 2.0), tol,
                  "input gradient of rank " + std::to_string(r));
      for (size_t s = 0; s < whole.state.size(); ++s)
        expect_near(
            mine.state[s], whole.state[s], tol,
            "running statistics (slot " + std::to_string(s) + ") of rank " + std::to_string(r));
    }
    EXPECT_NEAR((ranks[0].loss + ranks[1].loss) / 2, whole.loss, tol * (1 + whole.loss));
    // The data-parallel average of the ranks' gradients is the whole batch's gradient.
    for (size_t s = 0; s < whole.grads.size(); ++s) {
      std::vector<double> mean = ranks[0].grads[s];
      for (size_t i = 0; i < mean.size(); ++i) mean[i] = (mean[i] + ranks[1].grads[s][i]) / 2;
      expect_near(mean, whole.grads[s], tol, "averaged gradient of slot " + std::to_string(s));
    }
    // Without the reducer each rank normalises its own sample: a different network.
    const std::vector<StepResult> local = step_ranks(g, t, 2, 1, nullptr);
    EXPECT_GT(max_difference(local[0].output, part(whole.output, 0, 2)), 1e-3);
  }
}

TEST(SyncBatchNorm, EvaluationMakesNoGroupCalls) {
  const Graph g = conv_bn_relu_graph();
  auto backend = make_backend("reference");
  Executor ex(g, *backend, CompileOptions{});
  test::LockstepGroup alone(1);
  ex.set_batch_stat_reducer(&alone.rank(0));
  fill_sample(ex, 0);
  ex.forward(false);
  EXPECT_EQ(alone.calls(), 0);
  ex.forward();
  ex.backward();
  EXPECT_EQ(alone.calls(), 3);
}

}  // namespace
}  // namespace crest
