// From a config's model section to a network. Which models exist is the model registry's
// business: this file knows only "a registered model, or a graph".
#include "crest/models/model_registry.hpp"
#include "crest/train/trainer.hpp"

namespace crest {

BuiltModel build_model(const ModelConfig& m) {
  if (m.graph) {
    BuiltModel b;
    b.graph = *m.graph;
    b.prediction = m.graph->outputs().at(0);
    b.loss = m.graph->loss();
    return b;
  }
  const ModelKind& kind = find_model_kind(m.name);
  // Attributes from a loaded config are canonical already; this also fills in a hand-made one.
  return kind.build(kind.canonical(m.attrs));
}

}  // namespace crest
