// One table of layer cases, one line each: a node (kind and attributes, as in a YAML model) and
// the per-sample shapes of its inputs. Every case runs
//   - a float64 gradient check on the reference backend: the analytic gradients of an MSE loss
//     on the node's output, for every parameter and float input, against central differences;
//   - an agreement check in float32 on every other registered backend: loss, output, parameter
//     and input gradients equal the reference backend's.
//   - a mixed-precision check: bf16 and fp16 on every backend that runs them (the reference
//     backend emulates both) against the reference backend's float32, within each type's
//     tolerance, and the node really stores its output in the 16-bit type when its kind runs in it.
// A new layer kind adds a line here (docs/adding-a-layer.md).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <iostream>
#include <memory>
#include <sstream>

#include "crest/graph/executor.hpp"
#include "crest/graph/graph_yaml.hpp"
#include "support/counting_backend.hpp"
#include "support/host_copy.hpp"
#include "support/test_util.hpp"

namespace crest {
namespace {

struct OpCase {
  std::string name;
  std::string node;  // a YAML flow mapping without braces
  // Per-sample shapes; a leading 0 marks int32 labels, a leading -1 a float target (a loss's
  // constant input, which gets no gradient).
  std::vector<std::vector<int64_t>> inputs;
  bool gradcheck = true;  // false: the op draws new randomness every forward
  bool half = true;       // its kind runs in bf16 and fp16 under mixed precision
};

// clang-format off
const std::vector<OpCase> kCases = {
  {"Conv1d", "kind: conv, out_channels: 5, kernel: [3]", {{3, 11}}},
  {"Conv1dStridedDilatedNoBias", "kind: conv, out_channels: 4, kernel: [3], stride: [2], dilation: [2], padding: [1], bias: false", {{3, 13}}},
  {"Conv2dBlockedChannels", "kind: conv, out_channels: 32, kernel: [3, 3], padding: [1]", {{16, 5, 5}}},
  {"Conv2dSameStride2", "kind: conv, out_channels: 4, kernel: [3, 3], stride: [2], same: true", {{3, 7, 8}}},
  {"Conv2dDilated", "kind: conv, out_channels: 3, kernel: [3, 3], dilation: [2], padding: [2]", {{2, 7, 6}}},
  {"Conv2dGroups", "kind: conv, out_channels: 6, kernel: [3, 3], groups: 3, padding: [1]", {{6, 5, 5}}},
  {"Conv2dGroupsStrided", "kind: conv, out_channels: 12, kernel: [3, 3], groups: 2, stride: [2]", {{8, 7, 7}}},
  {"Conv2dGroupsBlockedNoBias", "kind: conv, out_channels: 64, kernel: [3, 3], groups: 2, bias: false", {{32, 5, 5}}},
  {"Conv2dDepthwise", "kind: conv, out_channels: 8, kernel: [3, 3], groups: 8, padding: [1], bias: false", {{8, 6, 6}}},
  // DeepLabv3+'s separable convolutions: depthwise with dilation 2 (padding = dilation) and with
  // stride 2, with enough channels for oneDNN's blocked depthwise kernels.
  {"Conv2dDepthwiseDilated", "kind: conv, out_channels: 16, kernel: [3, 3], groups: 16, dilation: [2], padding: [2], bias: false", {{16, 7, 6}}},
  {"Conv2dDepthwiseStride2", "kind: conv, out_channels: 16, kernel: [3, 3], groups: 16, stride: [2], padding: [1], bias: false", {{16, 8, 7}}},
  {"Conv3dSame", "kind: conv, out_channels: 4, kernel: [3, 3, 3], same: true, l2: 0.1", {{2, 4, 5, 4}}},
  {"Conv3dStridedBlocked", "kind: conv, out_channels: 32, kernel: [3, 3, 3], stride: [2]", {{16, 5, 5, 5}}},
  {"Conv3dGroupsDilatedNoBias", "kind: conv, out_channels: 8, kernel: [3, 3, 3], groups: 2, dilation: [2], padding: [2], bias: false", {{8, 5, 5, 5}}},
  {"ConvTranspose1d", "kind: conv_transpose, out_channels: 3, kernel: [3], stride: [2], padding: [1], output_padding: [1]", {{2, 5}}},
  {"ConvTranspose2d", "kind: conv_transpose, out_channels: 3, kernel: [3, 3], stride: [2], padding: [1], output_padding: [1]", {{4, 4, 3}}},
  // Exact x2 upsampling (DeepLabv3+'s decoder): 3x3, stride 2, padding 1, output_padding 1.
  {"ConvTranspose2dUpsample2xBlocked", "kind: conv_transpose, out_channels: 16, kernel: [3, 3], stride: [2], padding: [1], output_padding: [1], bias: false", {{16, 3, 4}}},
  {"ConvTranspose2dBlocked", "kind: conv_transpose, out_channels: 8, kernel: [4, 4], stride: [2], padding: [1]", {{16, 4, 4}}},
  {"ConvTranspose2dGroupsNoBias", "kind: conv_transpose, out_channels: 4, kernel: [3, 3], groups: 2, stride: [2], padding: [1], output_padding: [1], bias: false", {{6, 5, 5}}},
  {"ConvTranspose2dDilated", "kind: conv_transpose, out_channels: 6, kernel: [3, 3], dilation: [2]", {{4, 5, 5}}},
  {"ConvTranspose3dBlocked", "kind: conv_transpose, out_channels: 16, kernel: [2, 2, 2], stride: [2]", {{16, 3, 3, 3}}},
  {"ConvTranspose3dGroups", "kind: conv_transpose, out_channels: 8, kernel: [3, 3, 3], groups: 2, stride: [2], padding: [1], output_padding: [1]", {{4, 3, 3, 3}}},
  {"ConvTranspose3d", "kind: conv_transpose, out_channels: 2, kernel: [2, 2, 2], stride: [2]", {{3, 2, 3, 2}}},
  {"MaxPool2d", "kind: max_pool, kernel: [2, 2]", {{3, 6, 8}}},
  {"MaxPool2dStridePadding", "kind: max_pool, kernel: [3, 3], stride: [2], padding: [1]", {{2, 7, 7}}},
  {"MaxPool3d", "kind: max_pool, kernel: [2, 2, 2]", {{2, 4, 4, 6}}},
  {"AvgPool2dIncludePad", "kind: avg_pool, kernel: [3, 3], stride: [2], padding: [1]", {{2, 7, 6}}},
  {"AvgPool2dExcludePad", "kind: avg_pool, kernel: [3, 3], stride: [2], padding: [1], count_include_pad: false", {{2, 7, 6}}},
  {"AvgPool3d", "kind: avg_pool, kernel: [2, 2, 2]", {{3, 4, 4, 4}}},
  {"GlobalAvgPool2d", "kind: global_avg_pool", {{4, 5, 3}}},
  {"GlobalAvgPool3d", "kind: global_avg_pool", {{3, 2, 3, 4}}},
  {"Relu", "kind: relu", {{3, 5, 4}}},
  {"LeakyRelu", "kind: leaky_relu, negative_slope: 0.3", {{3, 5, 4}}},
  {"Tanh", "kind: tanh", {{17}}},
  {"Sigmoid", "kind: sigmoid", {{2, 3, 3}}},
  {"Scale", "kind: scale, scale: 1.2, shift: -0.5", {{7}}},
  {"ChannelAffine", "kind: channel_affine", {{3, 4, 5}}},
  {"BatchNorm1d", "kind: batch_norm", {{3, 7}}},
  {"BatchNorm2d", "kind: batch_norm, momentum: 0.2, eps: 0.001", {{4, 3, 5}}},
  {"BatchNorm3d", "kind: batch_norm", {{3, 2, 3, 4}}},
  {"Dense", "kind: dense, out_features: 5, l2: 0.05", {{12}}},
  {"DenseNoBias", "kind: dense, out_features: 3, bias: false, init: kaiming_normal", {{6}}},
  {"Add", "kind: add", {{3, 4, 4}, {3, 4, 4}}},
  {"Concat", "kind: concat", {{2, 3, 3}, {3, 3, 3}, {1, 3, 3}}},
  {"Flatten", "kind: flatten", {{3, 2, 2}}},
  {"ExpandAs", "kind: expand_as", {{3, 1, 1}, {-1, 2, 4, 5}}},
  {"Dropout", "kind: dropout, p: 0.4", {{64}}, /*gradcheck=*/false},
  {"DropoutOnAFeatureMap", "kind: dropout, p: 0.4", {{3, 4, 5}}, /*gradcheck=*/false},
  {"MseLoss", "kind: mse_loss", {{5}, {-1, 5}}, true, /*half=*/false},
  {"SoftmaxCrossEntropy", "kind: softmax_cross_entropy, class_weights: [1.0, 2.6, 1.7]", {{3, 4, 5}, {0, 4, 5}}, true, /*half=*/false},
  {"SoftmaxCrossEntropyLabelSmoothing", "kind: softmax_cross_entropy, label_smoothing: 0.1", {{10}, {0}}, true, /*half=*/false},
};
// clang-format on

void PrintTo(const OpCase& c, std::ostream* os) { *os << c.name; }

constexpr int64_t kBatch = 2;

bool is_label(const std::vector<int64_t>& shape) { return !shape.empty() && shape[0] == 0; }
bool is_constant(const std::vector<int64_t>& shape) { return !shape.empty() && shape[0] <= 0; }

std::string shape_text(std::vector<int64_t> s) {
  if (is_constant(s)) s.erase(s.begin());
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

// The case as a graph: inputs in0.., the node "op", and an MSE loss against input "target" of
// the output's shape unless the node is a loss itself. A probe has no loss: it finds the shape.
Graph case_graph(const OpCase& c, const std::string& target_shape, bool probe = false) {
  std::ostringstream y;
  y << "inputs:\n";
  std::string names;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const std::string name = (is_constant(c.inputs[i]) ? "const" : "in") + std::to_string(i);
    y << "  - {name: " << name << ", shape: " << shape_text(c.inputs[i])
      << (is_label(c.inputs[i]) ? ", integer: true" : "") << "}\n";
    names += (i ? ", " : "") + name;
  }
  if (!target_shape.empty()) y << "  - {name: target, shape: " << target_shape << "}\n";
  y << "layers:\n  - {name: op, " << c.node << ", inputs: [" << names << "]}\n";
  if (!target_shape.empty()) y << "  - {name: loss, kind: mse_loss, inputs: [op, target]}\n";
  y << "outputs: [op]\n";
  if (!probe) y << "loss: " << (target_shape.empty() ? "op" : "loss") << "\n";
  return graph_from_yaml(YAML::Load(y.str()), c.name);
}

Graph graph_for(const OpCase& c) {
  const Graph probe = case_graph(c, "", /*probe=*/true);
  auto backend = make_backend("reference");
  CompileOptions o;
  o.batch = kBatch;
  o.training = false;
  Executor ex(probe, *backend, o);
  if (ex.output(probe.output_of("op")).shape() == Shape{1}) return case_graph(c, "");  // a loss
  return case_graph(c, ex.output(probe.output_of("op")).shape().without_batch().str());
}

// Parameters away from their initialisers (a scale initialised to 1 would hide a backward that
// forgets it): the same pseudo-random values in [-1, 1) for every dtype and backend.
void fill_params(Executor& ex, MemoryResource& memory) {
  for (size_t s = 0; s < ex.params().slots().size(); ++s)
    test::write_host(memory, ex.params().value(s), [s](const TensorView& w) {
      for (int64_t i = 0; i < w.numel(); ++i) {
        const double v = static_cast<double>((i * 2654435761u + 97 * s) % 2000) / 1000.0 - 1.0;
        if (w.dtype() == DType::f64)
          w.as<double>()[i] = v;
        else
          w.as<float>()[i] = static_cast<float>(v);
      }
    });
}

// Distinct values at least 2/n apart, none within 1/n of 0: no ReLU kink or max-pool tie can
// be crossed by a difference step.
void fill_inputs(Executor& ex, const Graph& g, MemoryResource& memory) {
  fill_params(ex, memory);
  for (size_t k = 0; k < g.inputs().size(); ++k)
    test::write_host(memory, ex.input(g.inputs()[k].name), [k](const TensorView& t) {
      const auto n = static_cast<size_t>(t.numel());
      std::vector<size_t> order(n);
      for (size_t i = 0; i < n; ++i) order[i] = (i * 7919 + 13 * k) % n;  // a permutation if n∤7919
      for (size_t i = 0; i < n; ++i) {
        const double v = (static_cast<double>(order[i]) + 0.5 - static_cast<double>(n) / 2) *
                         (2.0 / static_cast<double>(n));
        if (t.dtype() == DType::i32)
          t.as<int32_t>()[i] = static_cast<int32_t>((i * 5 + i / 3) % 3);
        else if (t.dtype() == DType::f64)
          t.as<double>()[i] = v;
        else
          t.as<float>()[i] = static_cast<float>(v);
      }
    });
}

// Inputs whose gradient the case checks: not labels, targets or a loss's constant input.
bool has_gradient(const GraphInput& in) { return in.name.rfind("in", 0) == 0 && !in.integer; }

// What the comparisons between backends and precisions compile with (same seed: same weights).
CompileOptions comparison_options() {
  CompileOptions o;
  o.batch = kBatch;
  o.input_grads = true;
  o.seed = 5;
  return o;
}

// Relative bounds (max error over 1 + max magnitude) for values (loss, output, parameters) and
// gradients.
struct Tolerance {
  double value, gradient;
};

// `ex` (its loss `loss`) agrees with `ref`: loss, the node's output, every parameter gradient and
// value (state a training forward updates: batch norm's running statistics), every input
// gradient.
void expect_agreement(const Executor& ex, double loss, const Executor& ref, double ref_loss,
                      const Graph& g, Tolerance tol, const std::string& what,
                      MemoryResource& memory) {
  // ex's tensors as host views (copies where its backend's memory is a device's).
  auto host = [&memory](const TensorView& v) { return test::HostCopy(memory, v); };
  EXPECT_NEAR(loss, ref_loss, tol.value * (1 + std::abs(ref_loss))) << what;
  const ValueId out = g.output_of("op");
  EXPECT_LT(test::rel_distance(host(ex.output(out)).view(), ref.output(out)), tol.value)
      << what << " output";
  for (size_t s = 0; s < ref.params().slots().size(); ++s) {
    const std::string& name = ref.params().slots()[s].name;
    EXPECT_LT(test::rel_distance(host(ex.params().grad(s)).view(), ref.params().grad(s)),
              tol.gradient)
        << what << " " << name;
    EXPECT_LT(test::rel_distance(host(ex.params().value(s)).view(), ref.params().value(s)),
              tol.value)
        << what << " value of " << name;
  }
  for (const auto& in : g.inputs()) {
    if (!has_gradient(in)) continue;
    EXPECT_LT(test::rel_distance(host(ex.input_grad(in.name)).view(), ref.input_grad(in.name)),
              tol.gradient)
        << what << " gradient of " << in.name;
  }
}

// A device backend (cuda) may not run every row yet: its refusal (the compile step's usage error
// naming the node) is printed, so the device check shows what it covers, and the row is skipped
// on that backend. A host backend must run every row.
bool refused_on_device(const Backend& backend, const std::string& case_name,
                       const std::function<void()>& compile) {
  try {
    compile();
    return false;
  } catch (const Error& e) {
    if (backend.memory().is_host() || e.kind() != ErrorKind::usage) throw;
    std::cout << "[ UNSUPPORTED ] " << case_name << " on " << backend.name() << ": " << e.what()
              << std::endl;
    return true;
  }
}

class OpTable : public ::testing::TestWithParam<OpCase> {};

TEST_P(OpTable, GradientsMatchCentralDifferencesInFloat64) {
  const OpCase& c = GetParam();
  if (!c.gradcheck) GTEST_SKIP() << c.name << " draws a new mask every forward pass";
  const Graph g = graph_for(c);
  auto backend = make_backend("reference");
  CompileOptions o;
  o.batch = kBatch;
  o.dtype = DType::f64;
  o.input_grads = true;
  o.seed = 5;
  Executor ex(g, *backend, o);
  fill_inputs(ex, g, backend->memory());
  ex.forward();
  ex.backward();
  // Analytic gradients first: the arena (input gradients) is reused by the forwards below.
  std::vector<std::pair<std::string, std::vector<double>>> analytic;
  std::vector<double*> where;
  for (const auto& in : g.inputs()) {
    if (!has_gradient(in)) continue;
    const TensorView gx = ex.input_grad(in.name);
    analytic.push_back({in.name, {gx.as<double>(), gx.as<double>() + gx.numel()}});
    where.push_back(ex.input(in.name).as<double>());
  }
  for (size_t s = 0; s < ex.params().slots().size(); ++s) {
    const TensorView gw = ex.params().grad(s);
    analytic.push_back(
        {ex.params().slots()[s].name, {gw.as<double>(), gw.as<double>() + gw.numel()}});
    where.push_back(ex.params().value(s).as<double>());
  }
  const double h = 1e-6;
  for (size_t t = 0; t < analytic.size(); ++t) {
    const auto& [name, grad] = analytic[t];
    // Every element of small tensors, about 40 spread over large ones.
    for (size_t i = 0; i < grad.size(); i += 1 + grad.size() / 40) {
      double* p = where[t] + i;
      const double keep = *p;
      *p = keep + h;
      const double plus = ex.forward();
      *p = keep - h;
      const double minus = ex.forward();
      *p = keep;
      const double numeric = (plus - minus) / (2 * h);
      EXPECT_NEAR(grad[i], numeric, 1e-6 * (1 + std::abs(numeric)))
          << c.name << ": " << name << "[" << i << "]";
    }
  }
}

// The reference run every other backend is compared with, and the weights it started from.
struct ReferenceRun {
  std::unique_ptr<Backend> backend = make_backend("reference");
  std::unique_ptr<Executor> ex;
  std::vector<char> initial_weights;
  double loss = 0;

  ReferenceRun(const Graph& g, const CompileOptions& o) {
    ex = std::make_unique<Executor>(g, *backend, o);
    const auto* init = static_cast<const char*>(ex->params().values());
    initial_weights.assign(init, init + ex->params().bytes());
    fill_inputs(*ex, g, backend->memory());
    loss = ex->forward();
    ex->backward();
  }
};

// `backend` compiles the case (unless it is a device backend that refuses it), starts from the
// reference's weights and agrees with the reference within `tol`.
void expect_backend_agrees(Backend& backend, const OpCase& c, const Graph& g,
                           const CompileOptions& o, const ReferenceRun& ref, Tolerance tol) {
  std::unique_ptr<Executor> ex;
  if (refused_on_device(backend, c.name, [&] { ex = std::make_unique<Executor>(g, backend, o); }))
    return;
  ASSERT_EQ(ex->params().bytes(), ref.ex->params().bytes());
  const HostStaging weights(backend.memory(), static_cast<const void*>(ex->params().values()),
                            ex->params().bytes());
  EXPECT_EQ(std::memcmp(weights.data(), ref.initial_weights.data(), ref.initial_weights.size()), 0)
      << "the same graph and seed give the same initial weights on every backend";
  fill_inputs(*ex, g, backend.memory());
  const double loss = ex->forward();
  ex->backward();
  expect_agreement(*ex, loss, *ref.ex, ref.loss, g, tol, backend.name(), backend.memory());
}

TEST_P(OpTable, EveryBackendAgreesWithTheReferenceInFloat32) {
  const OpCase& c = GetParam();
  const Graph g = graph_for(c);
  const CompileOptions o = comparison_options();
  const ReferenceRun ref(g, o);
  for (const std::string& name : backend_names()) {
    if (name == "reference") continue;
    auto backend = make_backend(name);
    expect_backend_agrees(*backend, c, g, o, ref, {2e-5, 2e-4});
  }
}

// The comparison above as it runs on a device backend, on any machine: the reference's kernels
// on memory the host may not read directly, so every input, weight and result goes through an
// explicit copy. The kernels are the reference's, so the results are its bits.
TEST_P(OpTable, APretendDeviceBackendAgreesThroughExplicitCopies) {
  const OpCase& c = GetParam();
  const Graph g = graph_for(c);
  const CompileOptions o = comparison_options();
  const ReferenceRun ref(g, o);
  test::CountingBackend device(/*pretend_device=*/true);
  expect_backend_agrees(device, c, g, o, ref, {1e-300, 1e-300});
  EXPECT_GT(device.memory().copies_to_device, 0);
  EXPECT_GT(device.memory().copies_to_host, 0);
}

// Mixed precision as it runs on a device backend: the reference's 16-bit emulation on memory the
// host may not read, so whatever the executor converts (16-bit inputs, the prediction the loss
// reads in float32, parameters it rounds) goes through explicit copies; the bits are the host
// run's.
TEST_P(OpTable, APretendDeviceBackendRunsMixedPrecisionThroughExplicitCopies) {
  const OpCase& c = GetParam();
  const Graph g = graph_for(c);
  CompileOptions o = comparison_options();
  o.half = DType::bf16;
  const ReferenceRun ref(g, o);
  test::CountingBackend device(/*pretend_device=*/true);
  expect_backend_agrees(device, c, g, o, ref, {1e-300, 1e-300});
  EXPECT_GT(device.memory().copies_to_device, 0);
  EXPECT_GT(device.memory().copies_to_host, 0);
}

// Relative tolerances (max error over 1 + max magnitude) of a 16-bit run against float32: a few
// roundings of the 16-bit type's unit (bf16 2^-8, fp16 2^-11). Worst cases measured over the table
// (2026-11-24, both backends): bf16 below 5e-3, fp16 6.2e-4; the bounds leave about 2x.
struct HalfTolerance {
  DType dtype;
  Tolerance bound;
};
constexpr HalfTolerance kHalfTolerances[] = {{DType::bf16, {1e-2, 1e-2}},
                                             {DType::f16, {1.5e-3, 1.5e-3}}};

// The line of node `name` in the executor's summary ("" when there is none).
std::string summary_line(const Executor& ex, const std::string& name) {
  std::istringstream lines(ex.summary());
  for (std::string line; std::getline(lines, line);)
    if (line.rfind(name + " ", 0) == 0) return line;
  return "";
}

TEST_P(OpTable, HalfPrecisionAgreesWithFloat32WithinItsTolerance) {
  const OpCase& c = GetParam();
  const Graph g = graph_for(c);
  CompileOptions o = comparison_options();
  auto reference = make_backend("reference");
  Executor ref(g, *reference, o);
  fill_inputs(ref, g, reference->memory());
  const double ref_loss = ref.forward();
  ref.backward();
  for (const auto& tol : kHalfTolerances) {
    for (const std::string& name : backend_names()) {
      auto backend = make_backend(name);
      if (!backend->supports_dtype(tol.dtype)) continue;
      o.half = tol.dtype;
      const std::string what = name + " " + dtype_name(tol.dtype);
      std::unique_ptr<Executor> ex;
      if (refused_on_device(*backend, c.name + " in " + dtype_name(tol.dtype),
                            [&] { ex = std::make_unique<Executor>(g, *backend, o); }))
        continue;
      fill_inputs(*ex, g, backend->memory());
      const double loss = ex->forward();
      ex->backward();
      expect_agreement(*ex, loss, ref, ref_loss, g, tol.bound, what, backend->memory());
      // Parameters and what callers read stay float32 whatever the node computes in.
      EXPECT_EQ(ex->params().dtype(), DType::f32);
      EXPECT_EQ(ex->output(g.output_of("op")).dtype(), DType::f32);
      EXPECT_EQ(
          summary_line(*ex, "op").find(" " + dtype_name(tol.dtype) + " ") != std::string::npos,
          c.half)
          << what << ": the node's output dtype\n"
          << ex->summary();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, OpTable, ::testing::ValuesIn(kCases),
                         [](const auto& c) { return c.param.name; });

}  // namespace
}  // namespace crest
