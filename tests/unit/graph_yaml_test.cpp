// Graphs written in YAML: CosmoFlow written as a graph file compiles to the same program as the
// C++ builder, any graph survives a round trip through its YAML text, and a bad file is refused
// with the line, the node and the key.
#include "crest/graph/graph_yaml.hpp"

#include <gtest/gtest.h>

#include <cstring>

#include "crest/core/error.hpp"
#include "crest/graph/executor.hpp"
#include "crest/models/cosmoflow.hpp"
#include "crest/models/resnet50.hpp"
#include "support/small_models.hpp"
#include "support/test_util.hpp"

namespace crest {
namespace {

Graph parse(const std::string& text) { return graph_from_yaml(YAML::Load(text), "m.yaml"); }

std::string error_of(const std::string& text) {
  try {
    parse(text);
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "accepted:\n" << text;
  return "";
}

// The graph of the model file `relative_path` equals `built`, and both compile to the same
// program: layer table, memory plan and initial weights (seed 11, batch `batch`).
void expect_file_is_the_builders(const std::string& relative_path, const Graph& built, int batch) {
  const std::string file = test::source_path(relative_path);
  const Graph from_yaml = graph_from_yaml(YAML::LoadFile(file), file);
  EXPECT_EQ(from_yaml, built) << graph_to_yaml(from_yaml) << "\n---\n" << graph_to_yaml(built);
  auto backend = make_backend(default_backend_name());
  CompileOptions c;
  c.batch = batch;
  c.seed = 11;
  Executor a(from_yaml, *backend, c), b(built, *backend, c);
  EXPECT_EQ(a.summary(), b.summary());
  EXPECT_EQ(a.plan().arena_bytes, b.plan().arena_bytes);
  ASSERT_EQ(a.params().bytes(), b.params().bytes());
  EXPECT_EQ(std::memcmp(a.params().values(), b.params().values(), a.params().bytes()), 0);
}

TEST(GraphYaml, CosmoFlowFileCompilesToTheBuildersProgram) {
  CosmoFlowOptions o;
  o.input_shape = {32, 32, 32, 4};
  o.dropout = 0.5;
  expect_file_is_the_builders("configs/models/cosmoflow-32.yaml", build_cosmoflow(o).graph, 2);
}

// configs/models/resnet50.yaml is build_resnet50's network (torchvision's node names, a scalar
// int32 label input).
TEST(GraphYaml, Resnet50FileCompilesToTheBuildersProgram) {
  expect_file_is_the_builders("configs/models/resnet50.yaml",
                              build_resnet50(Resnet50Options{}).graph, 1);
}

TEST(GraphYaml, EveryTestModelSurvivesARoundTrip) {
  for (const Graph& g : {test::branchy_model(0.25f).graph, test::segmentation_model().graph,
                         test::pooling3d_model().graph}) {
    const std::string text = graph_to_yaml(g);
    EXPECT_EQ(parse(text), g) << text;
  }
}

TEST(GraphYaml, InputsDefaultToTheLayerAbove) {
  const Graph g = parse(R"(
inputs: [{name: x, shape: [3, 8]}]
layers:
  - {name: a, kind: relu}
  - {name: b, kind: tanh}
  - {name: c, kind: add, inputs: [a, b]}
outputs: [c]
)");
  ASSERT_EQ(g.nodes().size(), 3u);
  EXPECT_EQ(g.nodes()[0].inputs, std::vector<ValueId>{g.input_value(0)});
  EXPECT_EQ(g.nodes()[1].inputs, g.nodes()[0].outputs);
  EXPECT_EQ(g.outputs(), g.nodes()[2].outputs);
}

TEST(GraphYaml, BadFilesNameTheLineTheNodeAndTheKey) {
  const std::string head = "inputs: [{name: x, shape: [2, 8, 8]}]\nlayers:\n";
  std::string e = error_of(head + "  - {name: c1, kind: convolution, out_channels: 2}\n");
  EXPECT_NE(e.find("m.yaml:3: model.layers[0] (c1).kind: unknown layer kind 'convolution'"),
            std::string::npos)
      << e;
  e = error_of(head + "  - {name: c1, kind: conv, out_channels: 2, kernal: [3, 3]}\n");
  EXPECT_NE(e.find("m.yaml:3: model.layers[0] (c1)"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown attribute 'kernal'"), std::string::npos) << e;
  e = error_of(head + "  - {name: c1, kind: conv, out_channels: two, kernel: [3, 3]}\n");
  EXPECT_NE(e.find("model.layers[0] (c1).out_channels: must be an integer"), std::string::npos)
      << e;
  e = error_of(head + "  - {name: c1, kind: conv, out_channels: 2, kernel: 3}\n");
  EXPECT_NE(e.find("(c1).kernel: must be a list of integers"), std::string::npos) << e;
  e = error_of(head + "  - {name: r, kind: relu}\n  - {name: s, kind: add, inputs: [r, q]}\n");
  EXPECT_NE(e.find("m.yaml:4: model.layers[1] (s).inputs[1]: no input or earlier layer is named "
                   "'q'"),
            std::string::npos)
      << e;
  e = error_of(head + "  - {kind: relu}\n");
  EXPECT_NE(e.find("model.layers[0]: a layer needs a name and a kind"), std::string::npos) << e;
  e = error_of(head + "  - {name: r, kind: relu}\nloss: nowhere\n");
  EXPECT_NE(e.find("m.yaml:4: model.loss: no input or earlier layer is named 'nowhere'"),
            std::string::npos)
      << e;
  e = error_of("inputs: [{name: x, shape: [0, 8]}]\nlayers: [{name: r, kind: relu}]\n");
  EXPECT_NE(e.find("model.inputs[0].shape: every dimension must be >= 1"), std::string::npos) << e;
  e = error_of("inputs: [{name: x, shape: [2]}]\nlayer: []\n");
  EXPECT_NE(e.find("model.layer: unknown key"), std::string::npos) << e;
  // Wiring errors found by the layer itself (shape inference runs at compile time) still name it.
  const Graph g = parse(head + "  - {name: fc, kind: dense, out_features: 2}\n");
  auto backend = make_backend("reference");
  try {
    Executor ex(g, *backend, CompileOptions{});
    ADD_FAILURE() << "a dense layer on a rank-3 input compiled";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("layer 'fc' (dense)"), std::string::npos) << err.what();
  }
}

// A label-smoothed loss takes no class weights (no reference defines that pair) and a smoothing
// in [0, 1): refused naming the file's line and the layer.
TEST(GraphYaml, RefusesALossThatSmoothsAndWeightsOrSmoothsTooMuch) {
  const std::string head =
      "inputs: [{name: x, shape: [4]}, {name: y, shape: [], integer: true}]\nlayers:\n";
  for (const auto& [attrs, text] : std::vector<std::pair<std::string, std::string>>{
           {"class_weights: [1, 2, 1, 1], label_smoothing: 0.1", "not both"},
           {"label_smoothing: 1.0", "[0, 1)"},
           {"label_smoothing: -0.1", "[0, 1)"}}) {
    const std::string e = error_of(head + "  - {name: l, kind: softmax_cross_entropy, " + attrs +
                                   ", inputs: [x, y]}\nloss: l\n");
    EXPECT_NE(e.find("m.yaml:3: model.layers[0] (l)"), std::string::npos) << e;
    EXPECT_NE(e.find(text), std::string::npos) << e;
  }
}

}  // namespace
}  // namespace crest
