#include "crest/export/inference_graph.hpp"

#include <map>
#include <vector>

#include "crest/core/error.hpp"
#include "crest/graph/layer_registry.hpp"

namespace crest {
namespace {

// Whether the node's layer is a loss reading logits (Layer::reads_logits): the layer says so.
bool reads_logits(const LayerSpec& spec) {
  const LayerKind& kind = find_layer_kind(spec.kind);
  return kind.make(kind.canonical(spec.attrs))->reads_logits();
}

// Marks the nodes whose outputs the prediction needs, walking back from it.
std::vector<bool> needed_nodes(const Graph& g, ValueId prediction) {
  std::vector<bool> needed_value(static_cast<size_t>(g.value_count()), false);
  std::vector<bool> needed(g.nodes().size(), false);
  needed_value[static_cast<size_t>(prediction)] = true;
  for (size_t i = g.nodes().size(); i-- > 0;) {
    const GraphNode& n = g.nodes()[i];
    for (ValueId out : n.outputs)
      if (needed_value[static_cast<size_t>(out)]) needed[i] = true;
    if (!needed[i]) continue;
    for (ValueId in : n.inputs) needed_value[static_cast<size_t>(in)] = true;
  }
  return needed;
}

const GraphInput& sample_input(const Graph& g, const std::string& name) {
  for (const GraphInput& in : g.inputs())
    if (in.name == name) return in;
  throw_input("the model has no input '" + name + "' for its samples");
}

}  // namespace

Graph inference_graph(const BuiltModel& model) {
  const Graph& g = model.graph;
  if (model.prediction < 0) throw_input("the model has no prediction to export");
  const GraphInput& x = sample_input(g, model.sample_input);
  Graph out;
  std::map<ValueId, ValueId> id;  // model's value -> the inference graph's
  for (size_t i = 0; i < g.inputs().size(); ++i)
    if (g.inputs()[i].name == x.name)
      id[g.input_value(i)] = out.input(x.name, x.per_sample, x.layout, x.integer);
  if (g.value_name(model.prediction) == x.name)
    throw_input("the model's prediction is its input '" + x.name + "'");
  const std::vector<bool> needed = needed_nodes(g, model.prediction);
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    if (!needed[i]) continue;
    const GraphNode& n = g.nodes()[i];
    std::vector<ValueId> inputs;
    for (ValueId v : n.inputs) {
      const auto it = id.find(v);
      if (it == id.end())
        throw_input("node '" + n.name + "' (" + n.layer.kind + ") reads '" + g.value_name(v) +
                    "', which inference does not have (only the input '" + x.name + "' is fed)");
      inputs.push_back(it->second);
    }
    out.add(n.name, n.layer, inputs, static_cast<int>(n.outputs.size()));
    for (size_t k = 0; k < n.outputs.size(); ++k)
      id[n.outputs[k]] = out.output_of(n.name, static_cast<int>(k));
  }
  out.mark_output(id.at(model.prediction));
  return out;
}

std::string prediction_name(const BuiltModel& model) {
  for (const GraphNode& n : model.graph.nodes())
    for (ValueId in : n.inputs)
      if (in == model.prediction && reads_logits(n.layer)) return "logits";
  return "y";
}

}  // namespace crest
