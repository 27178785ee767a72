// From a config's model section to a network. Which models exist is the model registry's
// business: this file knows only "a registered model, or a graph".
#include "crest/core/error.hpp"
#include "crest/models/model_registry.hpp"
#include "crest/train/trainer.hpp"

namespace crest {

BuiltModel build_model(const ModelConfig& m) {
  if (m.graph) {
    BuiltModel b;
    b.graph = *m.graph;
    b.prediction = m.graph->outputs().at(0);
    b.loss = m.graph->loss();
    // The data feeds the graph's inputs in order: each batch's samples, then their targets.
    const auto& inputs = m.graph->inputs();
    if (inputs.size() != 2)
      throw_input(
          "model.inputs: a graph model takes two inputs, the samples and their targets, "
          "in that order (it has " +
          std::to_string(inputs.size()) + ")");
    b.sample_input = inputs[0].name;
    b.target_input = inputs[1].name;
    return b;
  }
  const ModelKind& kind = find_model_kind(m.name);
  // Attributes from a loaded config are canonical already; this also fills in a hand-made one.
  return kind.build(kind.canonical(m.attrs));
}

}  // namespace crest
