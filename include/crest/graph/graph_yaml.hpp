// A graph written in YAML, so a user defines a network without writing C++ (docs/models.md):
//
//   inputs:
//     - {name: x, shape: [4, 32, 32, 32], layout: channels_last}   # per sample, channels first
//     - {name: y, shape: [4]}
//   layers:
//     - {name: conv1, kind: conv, out_channels: 32, kernel: [3, 3, 3], same: true}
//     - {name: act1, kind: leaky_relu, negative_slope: 0.3}            # input: the node above
//     - {name: loss, kind: mse_loss, inputs: [prediction, y]}
//   outputs: [prediction]
//   loss: loss
//
// Every other key of a layer is an attribute of its kind (layer_registry.hpp).
#pragma once
#include <yaml-cpp/yaml.h>

#include <string>

#include "crest/graph/graph.hpp"

namespace crest {

// The keys of a graph section besides those of a model's own options.
bool is_graph_yaml_key(const std::string& key);

// Reads `section` (the mapping above). Errors are crest::Error (input) that start with
// "source:line: path.layers[i] (name)" and name the key that is wrong.
Graph graph_from_yaml(const YAML::Node& section, const std::string& source,
                      const std::string& path = "model");

// The same format back: graph_from_yaml(YAML::Load(graph_to_yaml(g))) == g.
std::string graph_to_yaml(const Graph& g);

}  // namespace crest
