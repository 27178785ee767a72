// One function per crest node kind that writes the ONNX nodes computing what crest's inference
// forward computes, registered in one table (node_exports.cpp). Values in the ONNX graph are in
// crest's logical layout [N, C, spatial...].
#pragma once
#include <string>
#include <vector>

#include "crest/graph/graph.hpp"
#include "onnx_builder.hpp"

namespace crest::onnx_export {

struct NodeContext {
  const GraphNode& node;
  const std::vector<Shape>& in;            // input shapes (batch 1)
  const std::vector<Shape>& out;           // output shapes (batch 1)
  const std::vector<std::string>& inputs;  // ONNX names of the inputs
  const std::string& output;               // the ONNX name the output must get
  OnnxGraphBuilder& b;
};

using NodeExport = void (*)(const NodeContext&);

// The export of `kind`, or null when crest has none (losses: inference does not run them).
NodeExport find_node_export(const std::string& kind);
// "add, avg_pool, ...": for the error that names an unsupported kind.
std::string exported_kinds();

}  // namespace crest::onnx_export
