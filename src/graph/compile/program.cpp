// The Program's helpers and the first pass: a fresh layer per graph node.
#include "compile/program.hpp"

#include <algorithm>

#include "crest/core/error.hpp"

namespace crest::compile {

void rethrow_for_node(const Error& e, const std::string& name, const std::string& kind) {
  throw Error(e.kind(), "layer '" + name + "' (" + kind + "): " + e.what());
}

std::vector<int> Program::graph_readers(const Graph& g) const {
  // Values a pass inserted (split_spatially's gathers) come after the graph's.
  std::vector<int> readers(std::max(static_cast<size_t>(g.value_count()), values.size()), 0);
  for (const auto& node : nodes)
    for (ValueId v : node.inputs) ++readers[static_cast<size_t>(v)];
  for (ValueId v : g.outputs()) readers[static_cast<size_t>(v)] += 2;
  if (g.loss() >= 0) readers[static_cast<size_t>(g.loss())] += 2;
  return readers;
}

int Program::add_op(std::unique_ptr<Op> o) {
  const int idx = static_cast<int>(ops.size());
  for (int v : o->in) val(v).consumers.push_back(idx);
  for (int v : o->out) val(v).producer = idx;
  ops.push_back(std::move(o));
  return idx;
}

int Program::add_value(const std::string& name, const Shape& shape) {
  values.push_back(std::make_unique<Value>());
  values.back()->name = name;
  values.back()->shape = shape;
  return static_cast<int>(values.size()) - 1;
}

// Compiling changes layers (fusion, kernels), never the graph: every compile makes its own.
// Without CompileOptions::loss the loss layers are left out (they have no parameters, so the
// parameter store is the same as with them).
void instantiate_layers(Program& p, const Graph& g) {
  p.inputs = g.inputs();
  for (const GraphNode& gn : g.nodes()) {
    Node node;
    node.name = gn.name;
    node.kind = gn.layer.kind;
    try {
      node.layer = find_layer_kind(gn.layer.kind).make(gn.layer.attrs);
    } catch (const Error& e) {
      rethrow_for_node(e, gn.name, gn.layer.kind);
    }
    if (!p.opts.loss && node.layer->is_loss()) continue;
    node.inputs = gn.inputs;
    node.outputs = gn.outputs;
    p.nodes.push_back(std::move(node));
  }
}

}  // namespace crest::compile
