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

ValueId Graph::add(const std::string& name, std::unique_ptr<Layer> layer,
                   const std::vector<ValueId>& inputs, int n_outputs) {
  for (const auto& n : nodes_)
    if (n.name == name) throw_usage("duplicate layer name '" + name + "'");
  for (ValueId v : inputs)
    if (v < 0 || v >= n_values_)
      throw_usage("layer '" + name + "' uses an undefined value " + std::to_string(v));
  GraphNode node;
  node.name = name;
  node.layer = std::move(layer);
  node.inputs = inputs;
  for (int i = 0; i < n_outputs; ++i) node.outputs.push_back(n_values_++);
  nodes_.push_back(std::move(node));
  return nodes_.back().outputs.empty() ? -1 : nodes_.back().outputs[0];
}

ValueId Graph::output_of(const std::string& node, int i) const {
  for (const auto& n : nodes_)
    if (n.name == node) return n.outputs.at(static_cast<size_t>(i));
  throw_usage("no layer named '" + node + "'");
}

}  // namespace crest
