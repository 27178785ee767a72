#include "crest/graph/graph.hpp"

#include "crest/core/error.hpp"

namespace crest {

ValueId Graph::input(const std::string& name, const Shape& per_sample, Layout layout,
                     bool integer) {
  if (!nodes_.empty())
    throw_usage("graph inputs must be declared before any layer ('" + name + "')");
  for (const auto& in : inputs_)
    if (in.name == name) throw_usage("duplicate graph input '" + name + "'");
  inputs_.push_back({name, per_sample, layout, integer});
  return n_values_++;
}

ValueId Graph::add(const std::string& name, const LayerSpec& layer,
                   const std::vector<ValueId>& inputs, int n_outputs) {
  for (const auto& n : nodes_)
    if (n.name == name) throw_input("duplicate layer name '" + name + "'");
  for (const auto& in : inputs_)
    if (in.name == name) throw_input("layer '" + name + "' has the name of a graph input");
  for (ValueId v : inputs)
    if (v < 0 || v >= n_values_)
      throw_usage("layer '" + name + "' uses an undefined value " + std::to_string(v));
  GraphNode node;
  node.name = name;
  node.layer.kind = layer.kind;
  try {
    node.layer.attrs = find_layer_kind(layer.kind).canonical(layer.attrs);
  } catch (const Error& e) {
    throw Error(e.kind(), "layer '" + name + "' (" + layer.kind + "): " + e.what());
  }
  node.inputs = inputs;
  for (int i = 0; i < n_outputs; ++i) node.outputs.push_back(n_values_++);
  nodes_.push_back(std::move(node));
  return nodes_.back().outputs.empty() ? -1 : nodes_.back().outputs[0];
}

ValueId Graph::output_of(const std::string& node, int i) const {
  for (const auto& n : nodes_)
    if (n.name == node) {
      if (i < 0 || static_cast<size_t>(i) >= n.outputs.size())
        throw_input("layer '" + node + "' has no output " + std::to_string(i));
      return n.outputs[static_cast<size_t>(i)];
    }
  throw_input("no layer named '" + node + "'");
}

std::string Graph::value_name(ValueId v) const {
  if (v >= 0 && static_cast<size_t>(v) < inputs_.size())
    return inputs_[static_cast<size_t>(v)].name;
  for (const auto& n : nodes_)
    for (size_t j = 0; j < n.outputs.size(); ++j)
      if (n.outputs[j] == v) return j == 0 ? n.name : n.name + ":" + std::to_string(j);
  return "value " + std::to_string(v);
}

}  // namespace crest
