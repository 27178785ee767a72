// From a config's model section to a network: the one place that knows which models exist.
#include "crest/core/error.hpp"
#include "crest/train/trainer.hpp"

namespace crest {

CosmoFlowOptions cosmoflow_options(const ModelConfig& m) {
  if (m.name != "cosmoflow")
    throw_input("model.name: unknown model '" + m.name + "' (available: cosmoflow)");
  CosmoFlowOptions o;
  if (m.input_shape.rank() != 4) throw_input("model.input_shape: expected [D, H, W, C]");
  o.input_shape = {m.input_shape[0], m.input_shape[1], m.input_shape[2], m.input_shape[3]};
  o.kernel_size = m.kernel_size;
  o.target_size = m.target_size;
  o.conv_size = m.conv_size;
  o.n_conv_layers = m.n_conv_layers;
  o.fc1_size = m.fc1_size;
  o.fc2_size = m.fc2_size;
  o.hidden_activation = activation_name(m.hidden_activation);
  o.pooling_type = pooling_name(m.pooling_type);
  o.dropout = m.dropout;
  o.l2 = m.l2;
  return o;
}

BuiltModel build_model(const ModelConfig& m) {
  if (m.graph) {
    BuiltModel b;
    b.graph = *m.graph;
    b.prediction = m.graph->outputs().at(0);
    b.loss = m.graph->loss();
    return b;
  }
  CosmoFlowModel c = build_cosmoflow(cosmoflow_options(m));
  BuiltModel b;
  b.graph = std::move(c.graph);
  b.prediction = c.prediction;
  b.loss = c.loss;
  return b;
}

}  // namespace crest
