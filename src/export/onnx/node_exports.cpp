#include "node_exports.hpp"

#include <algorithm>
#include <map>

#include "crest/core/error.hpp"

namespace crest::onnx_export {
namespace {

// ---- reading a node's canonical attributes ----

const AttrValue& attr(const GraphNode& n, const std::string& key) {
  const AttrValue* v = n.layer.attrs.find(key);
  CREST_CHECK(v, "node '" + n.name + "' has no attribute '" + key + "'");
  return *v;
}
std::vector<int64_t> ints(const GraphNode& n, const std::string& key) {
  return std::get<std::vector<int64_t>>(attr(n, key));
}
int64_t integer(const GraphNode& n, const std::string& key) {
  return std::get<int64_t>(attr(n, key));
}
bool flag(const GraphNode& n, const std::string& key) { return std::get<bool>(attr(n, key)); }
// Layers compute with float attributes: the same float here.
float number(const GraphNode& n, const std::string& key) {
  return static_cast<float>(std::get<double>(attr(n, key)));
}

// A per-dimension list as the layers read it: empty = `dflt` everywhere, one entry = everywhere.
std::vector<int64_t> per_dim(const std::vector<int64_t>& v, size_t rank, int64_t dflt) {
  if (v.empty()) return std::vector<int64_t>(rank, dflt);
  if (v.size() == 1) return std::vector<int64_t>(rank, v[0]);
  return v;
}

// ONNX pads: every dimension's begin, then every dimension's end.
std::vector<int64_t> pads(const std::vector<int64_t>& lo, const std::vector<int64_t>& hi) {
  std::vector<int64_t> p = lo;
  p.insert(p.end(), hi.begin(), hi.end());
  return p;
}

// [1, C, 1, ...]: a per-channel vector broadcast over a tensor of `rank`.
std::vector<int64_t> channel_dims(int64_t c, int rank) {
  std::vector<int64_t> d(static_cast<size_t>(rank), 1);
  d[1] = c;
  return d;
}

// ---- one function per kind ----

// Conv or ConvTranspose: the two kinds differ only in the ONNX op and in "same" padding.
void export_convolution(const NodeContext& c, bool transposed) {
  const GraphNode& n = c.node;
  const std::vector<int64_t> kernel = ints(n, "kernel");
  const size_t r = kernel.size();
  const auto stride = per_dim(ints(n, "stride"), r, 1);
  const auto dilation = per_dim(ints(n, "dilation"), r, 1);
  const auto padding = per_dim(ints(n, "padding"), r, 0);
  std::vector<int64_t> lo = padding, hi = padding;
  std::vector<int64_t> extra =
      transposed ? per_dim(ints(n, "output_padding"), r, 0) : std::vector<int64_t>(r, 0);
  if (flag(n, "same")) {
    // TensorFlow's "same": out = ceil(in / stride), the odd pixel of padding at the end; a
    // transposed conv is padded as the conv from its output back to its input, and whatever
    // that leaves short of in * stride is output padding at the end.
    for (size_t i = 0; i < r; ++i) {
      const int64_t in = c.in[0][static_cast<int>(2 + i)], out = c.out[0][static_cast<int>(2 + i)];
      const int64_t small = transposed ? in : out, large = transposed ? out : in;
      const int64_t eff = dilation[i] * (kernel[i] - 1) + 1;
      const int64_t total = std::max<int64_t>((small - 1) * stride[i] + eff - large, 0);
      lo[i] = total / 2;
      hi[i] = total - total / 2;
      extra[i] = large - ((small - 1) * stride[i] + eff - total);
    }
  }
  std::vector<std::string> inputs{c.inputs[0], c.b.param(n.name, "weight")};
  if (flag(n, "bias")) inputs.push_back(c.b.param(n.name, "bias"));
  onnx::NodeProto& node =
      c.b.node(transposed ? "ConvTranspose" : "Conv", n.name, inputs, {c.output});
  set_attr(node, "kernel_shape", kernel);
  set_attr(node, "strides", stride);
  set_attr(node, "dilations", dilation);
  set_attr(node, "pads", pads(lo, hi));
  set_attr(node, "group", integer(n, "groups"));
  // Both add output_padding at the end of each dimension (PyTorch's meaning).
  if (transposed) set_attr(node, "output_padding", extra);
}

void export_conv(const NodeContext& c) { export_convolution(c, false); }
void export_conv_transpose(const NodeContext& c) { export_convolution(c, true); }

// MaxPool or AveragePool over a window.
void export_window_pool(const NodeContext& c, bool max) {
  const GraphNode& n = c.node;
  const std::vector<int64_t> kernel = ints(n, "kernel");
  const size_t r = kernel.size();
  const auto padding = per_dim(ints(n, "padding"), r, 0);
  onnx::NodeProto& node =
      c.b.node(max ? "MaxPool" : "AveragePool", n.name, {c.inputs[0]}, {c.output});
  set_attr(node, "kernel_shape", kernel);
  set_attr(node, "strides", ints(n, "stride").empty() ? kernel : per_dim(ints(n, "stride"), r, 1));
  set_attr(node, "pads", pads(padding, padding));
  if (!max) set_attr(node, "count_include_pad", int64_t{flag(n, "count_include_pad") ? 1 : 0});
}

void export_max_pool(const NodeContext& c) { export_window_pool(c, true); }
void export_avg_pool(const NodeContext& c) { export_window_pool(c, false); }

void export_global_avg_pool(const NodeContext& c) {
  c.b.node("GlobalAveragePool", c.node.name, {c.inputs[0]}, {c.output});
}

// y = x W^T + b with W [out, in], as ONNX's Gemm with transB.
void export_dense(const NodeContext& c) {
  std::vector<std::string> inputs{c.inputs[0], c.b.param(c.node.name, "weight")};
  if (flag(c.node, "bias")) inputs.push_back(c.b.param(c.node.name, "bias"));
  set_attr(c.b.node("Gemm", c.node.name, inputs, {c.output}), "transB", int64_t{1});
}

void export_relu(const NodeContext& c) { c.b.node("Relu", c.node.name, {c.inputs[0]}, {c.output}); }
void export_leaky_relu(const NodeContext& c) {
  set_attr(c.b.node("LeakyRelu", c.node.name, {c.inputs[0]}, {c.output}), "alpha",
           number(c.node, "negative_slope"));
}
void export_tanh(const NodeContext& c) { c.b.node("Tanh", c.node.name, {c.inputs[0]}, {c.output}); }
void export_sigmoid(const NodeContext& c) {
  c.b.node("Sigmoid", c.node.name, {c.inputs[0]}, {c.output});
}

// y = scale x + shift.
void export_scale(const NodeContext& c) {
  const GraphNode& n = c.node;
  const std::string a = c.b.floats(n.name + ".scale", {}, {number(n, "scale")});
  const float shift = number(n, "shift");
  if (shift == 0.f) {
    c.b.node("Mul", n.name, {c.inputs[0], a}, {c.output});
    return;
  }
  const std::string scaled = c.b.fresh(n.name + ".scaled");
  c.b.node("Mul", n.name, {c.inputs[0], a}, {scaled});
  c.b.node("Add", n.name + ".shift", {scaled, c.b.floats(n.name + ".shift", {}, {shift})},
           {c.output});
}

// Inverted dropout is the identity in inference.
void export_dropout(const NodeContext& c) {
  c.b.node("Identity", c.node.name, {c.inputs[0]}, {c.output});
}

void export_add(const NodeContext& c) {
  c.b.node("Add", c.node.name, {c.inputs[0], c.inputs[1]}, {c.output});
}

void export_concat(const NodeContext& c) {
  set_attr(c.b.node("Concat", c.node.name, c.inputs, {c.output}), "axis", int64_t{1});
}

// crest flattens [N, C, spatial...] in spatial..., C order (the reference Keras models'
// channels-last order, so their dense weights load unchanged): channels go last first.
void export_flatten(const NodeContext& c) {
  const int rank = c.in[0].rank();
  std::string x = c.inputs[0];
  if (rank > 2) {
    std::vector<int64_t> perm{0};
    for (int i = 2; i < rank; ++i) perm.push_back(i);
    perm.push_back(1);
    x = c.b.fresh(c.node.name + ".channels_last");
    set_attr(c.b.node("Transpose", c.node.name + ".to_channels_last", {c.inputs[0]}, {x}), "perm",
             perm);
  }
  set_attr(c.b.node("Flatten", c.node.name, {x}, {c.output}), "axis", int64_t{1});
}

// Inference normalises with the running statistics (PyTorch's eval mode).
void export_batch_norm(const NodeContext& c) {
  const std::string& n = c.node.name;
  onnx::NodeProto& node = c.b.node("BatchNormalization", n,
                                   {c.inputs[0], c.b.param(n, "weight"), c.b.param(n, "bias"),
                                    c.b.param(n, "running_mean"), c.b.param(n, "running_var")},
                                   {c.output});
  set_attr(node, "epsilon", number(c.node, "eps"));
}

// y = weight[c] x + bias[c], the vectors shaped [1, C, 1, ...] to broadcast.
void export_channel_affine(const NodeContext& c) {
  const GraphNode& n = c.node;
  const auto dims = channel_dims(c.in[0][1], c.in[0].rank());
  if (!flag(n, "shift")) {
    c.b.node("Mul", n.name, {c.inputs[0], c.b.param(n.name, "weight", dims)}, {c.output});
    return;
  }
  const std::string scaled = c.b.fresh(n.name + ".scaled");
  c.b.node("Mul", n.name, {c.inputs[0], c.b.param(n.name, "weight", dims)}, {scaled});
  c.b.node("Add", n.name + ".shift", {scaled, c.b.param(n.name, "bias", dims)}, {c.output});
}

// x [N, C, 1, ...] repeated over the reference's spatial size: its shape is fixed at export
// (only the batch may vary), so Expand to [1, C, spatial...] broadcasts against x's N.
void export_expand_as(const NodeContext& c) {
  std::vector<int64_t> shape = c.out[0].to_vector();
  shape[0] = 1;
  const std::string s =
      c.b.int64s(c.node.name + ".shape", {static_cast<int64_t>(shape.size())}, shape);
  c.b.node("Expand", c.node.name, {c.inputs[0], s}, {c.output});
}

// Every kind an inference graph can hold (OnnxExport.EveryKindButTheLossesHasAnExport checks that
// each registered layer kind but the losses is here).
const std::map<std::string, NodeExport>& table() {
  static const std::map<std::string, NodeExport> t = {
      {"conv", export_conv},
      {"conv_transpose", export_conv_transpose},
      {"max_pool", export_max_pool},
      {"avg_pool", export_avg_pool},
      {"global_avg_pool", export_global_avg_pool},
      {"dense", export_dense},
      {"relu", export_relu},
      {"leaky_relu", export_leaky_relu},
      {"tanh", export_tanh},
      {"sigmoid", export_sigmoid},
      {"scale", export_scale},
      {"dropout", export_dropout},
      {"add", export_add},
      {"concat", export_concat},
      {"flatten", export_flatten},
      {"batch_norm", export_batch_norm},
      {"channel_affine", export_channel_affine},
      {"expand_as", export_expand_as},
  };
  return t;
}

}  // namespace

NodeExport find_node_export(const std::string& kind) {
  const auto it = table().find(kind);
  return it == table().end() ? nullptr : it->second;
}

std::string exported_kinds() {
  std::string s;
  for (const auto& [kind, fn] : table()) s += (s.empty() ? "" : ", ") + kind;
  return s;
}

}  // namespace crest::onnx_export
