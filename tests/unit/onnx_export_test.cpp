// The ONNX export in process (crest/export/onnx_export.hpp): the small test graphs, which between
// them use every exported kind the registered models do not (grouped, dilated and bias-free
// convolutions, average and global pooling, sigmoid, a plain-layout input), pass ONNX's checker;
// an unexported kind is refused naming the node and the kind; the inference graph leaves the loss
// out. With CREST_ONNX_INTEROP_DIR set, each model is written there with a random input and
// crest's inference prediction on it (<name>.onnx, <name>.x.npy, <name>.y.npy), which
// tests/interop/onnx_interop.py runs in ONNX Runtime.
#include "crest/export/onnx_export.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "crest/core/atomic_file.hpp"
#include "crest/core/error.hpp"
#include "crest/data/formats/npy.hpp"
#include "crest/export/inference_check.hpp"
#include "crest/export/inference_graph.hpp"
#include "crest/graph/executor.hpp"
#include "crest/layers/shape_ops.hpp"
#include "support/cli_util.hpp"
#include "support/layer_kinds.hpp"
#include "support/small_models.hpp"
#include "support/test_util.hpp"

namespace crest {

// A kind that exists only in this test: a flatten under a name the export has no mapping for.
CREST_REGISTER_LAYER(test_unexported, layer_kind<FlattenLayer>("test_unexported"));

namespace {

BuiltModel built(const test::SmallModel& m) {
  BuiltModel b;
  b.graph = m.graph;
  b.prediction = m.out;
  b.loss = m.loss;
  return b;
}

// An inference executor of `graph` at batch 2 with every parameter random (biases too: zeros
// would hide a bias left out).
std::unique_ptr<Executor> inference_executor(const Graph& graph, Backend& backend) {
  CompileOptions co;
  co.batch = 2;
  co.training = false;
  auto ex = std::make_unique<Executor>(graph, backend, co);
  const ParamStore& p = ex->params();
  test::fill_uniform(TensorView(p.values(), {Shape{static_cast<int64_t>(p.bytes() / 4)}}), 11, -0.5,
                     0.5);
  return ex;
}

bool onnx_built() {
  try {
    require_onnx_export();
    return true;
  } catch (const Error&) {
    return false;
  }
}

// Exports `m` (must pass the checker inside export_onnx) and, for the interop script, writes the
// model with an input and crest's prediction on it.
void export_small_model(const std::string& name, const test::SmallModel& m) {
  if (!onnx_built()) GTEST_SKIP() << "built without ONNX";
  const BuiltModel model = built(m);
  const Graph graph = inference_graph(model);
  auto backend = make_backend("reference");
  auto ex = inference_executor(graph, *backend);
  std::string bytes;
  ASSERT_NO_THROW(bytes = export_onnx(model, ex->params(), {})) << name;
  EXPECT_GT(bytes.size(), 100u);
  const char* dir = std::getenv("CREST_ONNX_INTEROP_DIR");
  if (!dir) return;
  const std::string base = std::string(dir) + "/" + name;
  write_file_atomically(base + ".onnx", bytes);
  const TensorView x = ex->input(graph.inputs().at(0).name);
  std::vector<float> values(static_cast<size_t>(x.numel()));
  test::fill_uniform(TensorView(values.data(), {Shape{x.numel()}}), 5);
  // [N, then the per-sample dims as the caller writes them: channels last where the input is]
  std::vector<int64_t> dims = graph.inputs()[0].per_sample.to_vector();
  if (graph.inputs()[0].layout == Layout::channels_last)
    std::rotate(dims.begin(), dims.begin() + 1, dims.end());
  std::vector<int64_t> batch_dims{2};
  batch_dims.insert(batch_dims.end(), dims.begin(), dims.end());
  write_npy(base + ".x.npy", DType::f32, batch_dims, values.data());
  run_inference_check(*ex, graph, read_check_input(base + ".x.npy", graph.inputs()[0]),
                      base + ".y.npy");
}

TEST(OnnxExport, BranchyGraphPassesTheChecker) {
  export_small_model("branchy", test::branchy_model(0.3f));
}
TEST(OnnxExport, SegmentationGraphPassesTheChecker) {
  export_small_model("segmentation", test::segmentation_model());
}
TEST(OnnxExport, Pooling3dGraphPassesTheChecker) {
  export_small_model("pooling3d", test::pooling3d_model());
}

TEST(OnnxExport, InferenceGraphLeavesTheLossAndTargetOut) {
  const test::SmallModel m = test::branchy_model();
  const Graph g = inference_graph(built(m));
  ASSERT_EQ(g.inputs().size(), 1u);
  EXPECT_EQ(g.inputs()[0].name, "x");
  for (const GraphNode& n : g.nodes()) EXPECT_NE(n.layer.kind, "mse_loss") << n.name;
  EXPECT_EQ(g.nodes().size(), m.graph.nodes().size() - 1);
  ASSERT_EQ(g.outputs().size(), 1u);
  EXPECT_EQ(g.value_name(g.outputs()[0]), "scale");
  EXPECT_EQ(prediction_name(built(m)), "y");
  EXPECT_EQ(prediction_name(built(test::segmentation_model())), "logits");
}

// A new layer kind must say how it exports (or be a loss, which inference leaves out): a kind
// missing from the export's table is caught here, not by a user's `crest export`.
TEST(OnnxExport, EveryKindButTheLossesHasAnExport) {
  for (const std::string& kind : layer_kind_names()) {
    if (kind == "test_unexported") continue;  // this file's own unexported kind
    EXPECT_EQ(onnx_exports_kind(kind), !test::make_minimal_layer(kind)->is_loss()) << kind;
  }
}

TEST(OnnxExport, UnexportedKindIsNamedWithItsNode) {
  if (!onnx_built()) GTEST_SKIP() << "built without ONNX";
  test::SmallModel m;
  m.x = m.graph.input("x", Shape{2, 4, 4}, Layout::channels_last);
  ValueId t = m.graph.add("odd_one", {"test_unexported", {}}, {m.x});
  m.out = m.graph.add("fc", layers::dense(DenseOptions{3, true, Init::glorot_uniform, 0.0}), {t});
  m.graph.mark_output(m.out);
  const BuiltModel model = built(m);
  auto backend = make_backend("reference");
  auto ex = inference_executor(inference_graph(model), *backend);
  try {
    export_onnx(model, ex->params(), {});
    FAIL() << "an unexported kind was exported";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
    EXPECT_NE(std::string(e.what()).find("node 'odd_one'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'test_unexported'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace crest
