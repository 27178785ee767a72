// The whole model: the input `x` as the data files hold it, a Transpose to crest's logical
// layout, every node through its export (node_exports.cpp), the prediction as the output, then
// ONNX's own checker before anything is returned.
#include <onnx/checker.h>

#include <algorithm>

#include "crest/core/error.hpp"
#include "crest/export/inference_graph.hpp"
#include "crest/export/onnx_export.hpp"
#include "node_exports.hpp"
#include "onnx_builder.hpp"

namespace crest {
namespace {

using onnx_export::HostParams;
using onnx_export::NodeContext;
using onnx_export::OnnxGraphBuilder;

constexpr int64_t kOpset = 17;
constexpr const char* kBatchDim = "N";

// A float32 graph input or output: `dims` per sample, after the batch dimension.
void describe_value(onnx::ValueInfoProto& v, const std::string& name,
                    const std::vector<int64_t>& dims, int64_t batch) {
  v.set_name(name);
  onnx::TypeProto_Tensor& t = *v.mutable_type()->mutable_tensor_type();
  t.set_elem_type(onnx::TensorProto::FLOAT);
  onnx::TensorShapeProto& s = *t.mutable_shape();
  if (batch > 0)
    s.add_dim()->set_dim_value(batch);
  else
    s.add_dim()->set_dim_param(kBatchDim);
  for (int64_t d : dims) s.add_dim()->set_dim_value(d);
}

// Every value's shape at batch 1, from each layer's own shape inference.
std::vector<Shape> value_shapes(const Graph& g) {
  std::vector<Shape> shapes(static_cast<size_t>(g.value_count()));
  for (size_t i = 0; i < g.inputs().size(); ++i)
    shapes[static_cast<size_t>(g.input_value(i))] = g.inputs()[i].per_sample.with_batch(1);
  for (const GraphNode& n : g.nodes()) {
    std::vector<Shape> in;
    for (ValueId v : n.inputs) in.push_back(shapes[static_cast<size_t>(v)]);
    const auto out = find_layer_kind(n.layer.kind).make(n.layer.attrs)->infer_shapes(in);
    for (size_t k = 0; k < n.outputs.size(); ++k)
      shapes[static_cast<size_t>(n.outputs[k])] = out[k];
  }
  return shapes;
}

// The input as the files hold it ([N, spatial..., C] when channels-last) and the Transpose that
// brings it to [N, C, spatial...].
void add_input(OnnxGraphBuilder& b, onnx::GraphProto& graph, const GraphInput& x, ValueId id,
               int64_t batch) {
  if (x.integer) throw_input("input '" + x.name + "' holds integers; only float inputs export");
  std::vector<int64_t> dims = x.per_sample.to_vector();
  const std::string name = b.fresh(x.name);
  if (x.layout != Layout::channels_last || dims.size() < 2) {
    describe_value(*graph.add_input(), name, dims, batch);
    b.set_value(id, name);
    return;
  }
  std::rotate(dims.begin(), dims.begin() + 1, dims.end());  // C last
  onnx::ValueInfoProto& input = *graph.add_input();
  describe_value(input, name, dims, batch);
  // What a consumer must know that the type does not say.
  input.set_doc_string(
      "channels last, as the data files hold it, after crest's loader preprocessing "
      "(CosmoFlow: ln(x + 1) with data.apply_log; DeepCAM: (x - min) / (max - min) per channel "
      "from stats.h5); see crest's docs/export.md");
  const int rank = static_cast<int>(dims.size()) + 1;
  std::vector<int64_t> perm{0, rank - 1};
  for (int i = 1; i < rank - 1; ++i) perm.push_back(i);
  const std::string logical = b.fresh(x.name + ".channels_first");
  onnx_export::set_attr(b.node("Transpose", x.name + ".to_channels_first", {name}, {logical}),
                        "perm", perm);
  b.set_value(id, logical);
}

void add_node(OnnxGraphBuilder& b, const GraphNode& n, const std::vector<Shape>& shapes,
              const std::string& output) {
  const onnx_export::NodeExport fn = onnx_export::find_node_export(n.layer.kind);
  if (!fn)
    throw_input("node '" + n.name + "' is of kind '" + n.layer.kind +
                "', which has no ONNX export (exported kinds: " + onnx_export::exported_kinds() +
                ")");
  if (n.outputs.size() != 1)
    throw_input("node '" + n.name + "' (" + n.layer.kind + ") has several outputs");
  std::vector<Shape> in, out{shapes[static_cast<size_t>(n.outputs[0])]};
  std::vector<std::string> inputs;
  for (ValueId v : n.inputs) {
    in.push_back(shapes[static_cast<size_t>(v)]);
    inputs.push_back(b.value(v));
  }
  fn(NodeContext{n, in, out, inputs, output, b});
  b.set_value(n.outputs[0], output);
}

void check(const onnx::ModelProto& model) {
  try {
    onnx::checker::check_model(model);
  } catch (const std::exception& e) {
    throw_runtime(std::string("internal error: the exported ONNX model fails ONNX's checker: ") +
                  e.what());
  }
}

}  // namespace

void require_onnx_export() {}

bool onnx_exports_kind(const std::string& kind) {
  return onnx_export::find_node_export(kind) != nullptr;
}

std::string export_onnx(const BuiltModel& model, const ParamStore& params,
                        const OnnxExportOptions& options) {
  const Graph g = inference_graph(model);
  const std::vector<Shape> shapes = value_shapes(g);
  onnx::ModelProto m;
  m.set_ir_version(onnx::IR_VERSION);
  m.set_producer_name("crest");
  m.set_producer_version(CREST_VERSION);
  m.add_opset_import()->set_version(kOpset);
  onnx::GraphProto& graph = *m.mutable_graph();
  graph.set_name("crest");
  const HostParams host(params);
  OnnxGraphBuilder b(graph, host);
  add_input(b, graph, g.inputs().at(0), g.input_value(0), options.batch);
  const ValueId prediction = g.outputs().at(0);
  const std::string out_name = prediction_name(model);
  b.fresh(out_name);  // reserved: no intermediate value may take the output's name
  for (const GraphNode& n : g.nodes()) {
    const bool last = n.outputs[0] == prediction;
    add_node(b, n, shapes, last ? out_name : b.fresh(n.name));
  }
  std::vector<int64_t> out_dims = shapes[static_cast<size_t>(prediction)].to_vector();
  out_dims.erase(out_dims.begin());
  describe_value(*graph.add_output(), out_name, out_dims, options.batch);
  check(m);
  std::string bytes;
  if (!m.SerializeToString(&bytes))
    throw_runtime("internal error: the ONNX model could not be serialised (over 2 GiB?)");
  return bytes;
}

}  // namespace crest
