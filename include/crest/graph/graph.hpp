// Graph: the specification of a network. Nodes have a registered layer kind, typed attributes
// and inputs; nothing here is compiled, so a Graph is a plain value: copyable, comparable, and
// compiled any number of times (train and eval batch sizes, another backend, another precision)
// without being changed. Shapes are per sample; the batch is fixed by compile().
#pragma once
#include <string>
#include <vector>

#include "crest/core/shape.hpp"
#include "crest/graph/layer_registry.hpp"

namespace crest {

using ValueId = int;

struct GraphInput {
  std::string name;
  Shape per_sample;      // logical dims without batch, channels first: [C, D, H, W]
  Layout layout;         // how the caller writes it (channels_last for the data files)
  bool integer = false;  // int32 (class labels) instead of the compile dtype
  bool operator==(const GraphInput& o) const = default;
};

struct GraphNode {
  std::string name;
  LayerSpec layer;  // canonical: every attribute of its kind, defaults filled in
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  bool operator==(const GraphNode& o) const = default;
};

class Graph {
 public:
  ValueId input(const std::string& name, const Shape& per_sample, Layout layout = Layout::plain,
                bool integer = false);
  // Adds a node; returns its first output. Node names must be unique (they prefix parameters).
  // The kind must be registered and the attributes valid for it: errors name the node and key.
  ValueId add(const std::string& name, const LayerSpec& layer, const std::vector<ValueId>& inputs,
              int n_outputs = 1);
  ValueId output_of(const std::string& node, int i = 0) const;
  void set_loss(ValueId v) { loss_ = v; }
  // Keeps a value readable after a step (predictions); the planner never reuses its memory.
  void mark_output(ValueId v) { outputs_.push_back(v); }

  int value_count() const { return n_values_; }
  const std::vector<GraphInput>& inputs() const { return inputs_; }
  ValueId input_value(size_t i) const { return static_cast<ValueId>(i); }
  const std::vector<GraphNode>& nodes() const { return nodes_; }
  ValueId loss() const { return loss_; }
  const std::vector<ValueId>& outputs() const { return outputs_; }
  // The name a value is known by: a graph input's name, a node's name, or "node:i" for output
  // i > 0 of a node with several.
  std::string value_name(ValueId v) const;

  bool operator==(const Graph& o) const = default;

 private:
  std::vector<GraphInput> inputs_;
  std::vector<GraphNode> nodes_;
  int n_values_ = 0;
  ValueId loss_ = -1;
  std::vector<ValueId> outputs_;
};

}  // namespace crest
