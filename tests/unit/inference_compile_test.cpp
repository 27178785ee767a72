// Inference programs (CompileOptions::training false): batch norm folded into the convolution
// before it gives the unfolded program's values, the plan needs far less memory than training's,
// a forward pass allocates nothing, and `loss: false` leaves the loss out.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "crest/core/hash_rng.hpp"
#include "crest/graph/executor.hpp"
#include "crest/layers/activation.hpp"
#include "crest/layers/batch_norm.hpp"
#include "crest/layers/conv.hpp"
#include "crest/models/cosmoflow.hpp"
#include "crest/models/deepcam.hpp"
#include "support/alloc_counter.hpp"
#include "support/host_backends.hpp"
#include "support/small_models.hpp"

namespace crest {
namespace {

double uniform(uint64_t key, uint64_t i) { return rng::unit_double(rng::counter_bits(key, i)); }

// conv (no bias) -> bn -> relu -> depthwise conv (bias) -> bn -> conv_transpose -> bn: the
// three weight layouts a fold must scale per output channel.
Graph conv_bn_graph() {
  Graph g;
  ValueId x = g.input("x", Shape{3, 8, 8});
  ConvOptions c;
  c.kernel = {3, 3};
  c.padding = {1, 1};
  c.out_channels = 4;
  c.bias = false;
  x = g.add("conv1", layers::conv(c), {x});
  x = g.add("bn1", layers::batch_norm(), {x});
  x = g.add("relu1", layers::relu(), {x});
  ConvOptions dw = c;
  dw.groups = 4;
  dw.bias = true;
  x = g.add("dw", layers::conv(dw), {x});
  x = g.add("bn2", layers::batch_norm(), {x});
  ConvOptions up;
  up.kernel = {2, 2};
  up.stride = {2, 2};
  up.out_channels = 6;
  up.groups = 2;
  up.bias = false;
  x = g.add("up", layers::conv_transpose(up), {x});
  x = g.add("bn3", layers::batch_norm(), {x});
  g.mark_output(x);
  return g;
}

// Every parameter, running statistics included, gets a value away from its initialisation
// (variances positive), so a fold that used the wrong channel or statistic shows.
void randomize_params(ParamStore& params, uint64_t seed) {
  for (size_t s = 0; s < params.slots().size(); ++s) {
    const ParamSlot& slot = params.slots()[s];
    float* v = static_cast<float*>(params.value(s).data());
    const bool variance = slot.name.ends_with("running_var");
    for (size_t i = 0; i < slot.count; ++i) {
      const double u = uniform(seed, s * 100003 + i);
      v[i] = static_cast<float>(variance ? 0.2 + 2 * u : 2 * u - 1);
    }
  }
}

// 32 x 48: the smallest size whose decoder still sees a 2 x 3 encoder output.
BuiltModel smallest_deepcam() {
  DeepcamOptions dc;
  dc.input_shape = {32, 48, 16};
  return build_deepcam(dc);
}

std::vector<float> run_inference(const Graph& g, const std::string& backend_name, bool fuse) {
  auto backend = make_backend(backend_name);
  CompileOptions o;
  o.batch = 2;
  o.training = false;
  o.fuse = fuse;
  Executor ex(g, *backend, o);
  randomize_params(ex.params(), 7);
  TensorView in = ex.input("x");
  float* x = static_cast<float*>(in.data());
  for (int64_t i = 0; i < in.numel(); ++i)
    x[i] = static_cast<float>(uniform(3, static_cast<uint64_t>(i)) - 0.5);
  ex.forward(false);
  const TensorView out = ex.output(g.outputs()[0]);
  const float* y = static_cast<const float*>(out.data());
  return {y, y + out.numel()};
}

TEST(InferenceCompile, BatchNormFoldedIntoConvolutionsGivesTheUnfoldedValues) {
  const Graph g = conv_bn_graph();
  for (const std::string& b : crest::test::host_backend_names()) {
    const std::vector<float> folded = run_inference(g, b, true);
    const std::vector<float> plain = run_inference(g, "reference", false);
    ASSERT_EQ(folded.size(), plain.size());
    double worst = 0;
    for (size_t i = 0; i < plain.size(); ++i)
      worst = std::max(worst, std::abs(folded[i] - plain[i]) / (1e-3 + std::abs(plain[i])));
    EXPECT_LT(worst, 1e-4) << b;
  }
}

TEST(InferenceCompile, FoldedBatchNormsRunNoKernelOfTheirOwn) {
  const Graph g = conv_bn_graph();
  auto backend = make_backend("reference");
  CompileOptions o;
  o.training = false;
  Executor folded(g, *backend, o);
  for (const OpProfile& op : folded.profile()) EXPECT_NE(op.kind, "batch_norm") << op.name;
  o.fuse = false;
  Executor unfolded(g, *backend, o);
  int bns = 0;
  for (const OpProfile& op : unfolded.profile()) bns += op.kind == "batch_norm";
  EXPECT_EQ(bns, 3);
  // The parameters keep their names: weights load into either program alike.
  EXPECT_EQ(folded.params().slots().size(), unfolded.params().slots().size());
}

TEST(InferenceCompile, FoldSeesParametersChangedAfterCompiling) {
  const Graph g = conv_bn_graph();
  auto backend = make_backend("reference");
  CompileOptions o;
  o.training = false;
  Executor ex(g, *backend, o);
  ex.forward(false);
  const TensorView out = ex.output(g.outputs()[0]);
  const float before = static_cast<const float*>(out.data())[0];
  const int beta = ex.params().find("bn3.bias");
  ASSERT_GE(beta, 0);
  float* b = static_cast<float*>(ex.params().value(static_cast<size_t>(beta)).data());
  for (int c = 0; c < 6; ++c) b[c] += 1.5F;
  ex.forward(false);
  EXPECT_FLOAT_EQ(static_cast<const float*>(out.data())[0], before + 1.5F);
}

// On the reference backend, whose kernels ask for no scratch: the plan's tensors alone. (oneDNN's
// scratch for DeepCAM's dilated convolutions on a tiny test image is larger than every tensor.)
TEST(InferenceCompile, PlanNeedsFarLessMemoryThanTraining) {
  auto backend = make_backend("reference");
  const CosmoFlowModel cf = build_cosmoflow(test::small_cosmoflow(64, 32, 0.5, 0.0));
  DeepcamOptions dc;
  dc.input_shape = {64, 96, 16};
  const BuiltModel deepcam = build_deepcam(dc);
  // CosmoFlow's peak is its first convolution's output in both (training adds the input's
  // gradient-free backward, so the ratio is small); DeepCAM's training keeps 200+ activations.
  const std::pair<const Graph*, double> cases[] = {{&cf.graph, 1.25}, {&deepcam.graph, 10}};
  for (const auto& [g, ratio] : cases) {
    CompileOptions o;
    o.batch = 2;
    const Executor train(*g, *backend, o);
    o.training = false;
    o.loss = false;
    const Executor infer(*g, *backend, o);
    // Training keeps every activation for backward and adds their gradients; inference frees
    // each activation after its last reader.
    EXPECT_LT(static_cast<double>(infer.plan().arena_bytes) * ratio,
              static_cast<double>(train.plan().arena_bytes))
        << "inference " << infer.plan().arena_bytes << " B, training " << train.plan().arena_bytes;
  }
}

TEST(InferenceCompile, ForwardAllocatesNothing) {
  auto backend = make_backend("reference");
  const BuiltModel m = smallest_deepcam();
  CompileOptions o;
  o.training = false;
  o.loss = false;
  Executor ex(m.graph, *backend, o);
  ex.forward(false);  // warm-up
  test::AllocationStats s;
  {
    test::AllocationCounter counter;
    ex.forward(false);
    s = counter.stats();
  }
  EXPECT_EQ(s.count, 0u) << "an inference pass allocated " << s.bytes << " bytes";
}

TEST(InferenceCompile, WithoutLossThePredictionIsTheSameAndNoLossRuns) {
  auto backend = make_backend("reference");
  const BuiltModel m = smallest_deepcam();
  CompileOptions o;
  o.training = false;
  Executor with_loss(m.graph, *backend, o);
  o.loss = false;
  Executor without(m.graph, *backend, o);
  for (const OpProfile& op : without.profile()) EXPECT_EQ(op.name.find("loss"), std::string::npos);
  for (Executor* ex : {&with_loss, &without}) {
    TensorView in = ex->input("x");
    float* x = static_cast<float*>(in.data());
    for (int64_t i = 0; i < in.numel(); ++i)
      x[i] = static_cast<float>(uniform(5, static_cast<uint64_t>(i)));
    std::memset(ex->input("y").data(), 0, ex->input("y").bytes());
    ex->forward(false);
  }
  const TensorView a = with_loss.output(m.prediction), b = without.output(m.prediction);
  ASSERT_EQ(a.bytes(), b.bytes());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.bytes()), 0);
  o.training = true;
  EXPECT_THROW(Executor(m.graph, *backend, o), Error);
}

}  // namespace
}  // namespace crest
