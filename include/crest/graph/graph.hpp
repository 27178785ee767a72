// Graph: the static layer graph a model builder fills in. Shapes are per sample here; the batch
// is fixed by compile().
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "crest/graph/layer.hpp"

namespace crest {

using ValueId = int;

struct GraphInput {
  std::string name;
  Shape per_sample;      // logical dims without batch, channels first: [C, D, H, W]
  Layout layout;         // how the caller writes it (channels_last for the data files)
  bool integer = false;  // int32 (class labels) instead of the compile dtype
};

struct GraphNode {
  std::string name;
  std::unique_ptr<Layer> layer;
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
};

class Graph {
 public:
  ValueId input(const std::string& name, const Shape& per_sample, Layout layout = Layout::plain,
                bool integer = false);
  // Adds a layer; returns its first output. Node names must be unique (they prefix parameters).
  ValueId add(const std::string& name, std::unique_ptr<Layer> layer,
              const std::vector<ValueId>& inputs, int n_outputs = 1);
  ValueId output_of(const std::string& node, int i = 0) const;
  void set_loss(ValueId v) { loss_ = v; }
  // Keeps a value readable after a step (predictions); the planner never reuses its memory.
  void mark_output(ValueId v) { outputs_.push_back(v); }

  int value_count() const { return n_values_; }
  const std::vector<GraphInput>& inputs() const { return inputs_; }
  ValueId input_value(size_t i) const { return static_cast<ValueId>(i); }
  std::vector<GraphNode>& nodes() { return nodes_; }
  const std::vector<GraphNode>& nodes() const { return nodes_; }
  ValueId loss() const { return loss_; }
  const std::vector<ValueId>& outputs() const { return outputs_; }

 private:
  std::vector<GraphInput> inputs_;
  std::vector<GraphNode> nodes_;
  int n_values_ = 0;
  ValueId loss_ = -1;
  std::vector<ValueId> outputs_;
};

}  // namespace crest
