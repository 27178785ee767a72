// Pipeline stages (dist.pipeline, docs/distributed.md): a graph cut into K consecutive runs of
// its nodes, each compiled on its own rank. A stage's graph is an ordinary Graph, so every backend,
// precision and compile pass applies to it unchanged:
//
// - its inputs are the whole graph's inputs its nodes read (the data on the first stage, the
//   labels on the last), then one input per value it receives from the stage before — every
//   value made before the cut and read after it, under the value's own name, in the order the
//   stage before sends them (a value crossing two cuts passes through the stage between);
// - a stage before the last ends, instead of the whole graph's loss, in an `upstream_gradient`
//   node reading each value it sends and, beside it, an input `<value>.gradient` that receives
//   that value's gradient from the stage after: backward then starts from exactly the received
//   gradients, and the stage's received inputs get gradients to send back (CompileOptions::
//   grad_inputs). The last stage keeps the whole graph's loss and marked outputs.
// - the values it sends are marked outputs (plain row-major, the compile dtype: what the next
//   stage's input takes).
//
// Parameters keep their names ("<node>.<param>"), so they are initialised as the whole graph's
// are and checkpoints, weights and gradients compare by name. `first_node` is the stage's first
// node's position in the whole graph: compiled with CompileOptions::first_random_stream set to
// it, each dropout draws the whole graph's masks.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "crest/graph/graph.hpp"

namespace crest {

struct PipelineStageGraph {
  Graph graph;
  std::vector<std::string> data_inputs;  // the whole graph's inputs this stage reads
  std::vector<std::string> received;     // from the stage before, in its `sent` order
  std::vector<std::string> sent;         // to the stage after
  uint64_t first_node = 0;
  std::string first_node_name, last_node_name;
};

// The input of a stage before the last that receives the gradient of the value it sends as `sent`.
std::string upstream_gradient_input(const std::string& sent);

// Cuts `whole` (which must have a loss) before each node named in `stage_starts` (the first node
// of stages 1..K-1, in the graph's order). Throws crest::Error (input) naming `what` (the
// config key) when a name is no node, the names are not in order, or the loss's node would not
// be in the last stage.
std::vector<PipelineStageGraph> cut_into_stages(const Graph& whole,
                                                const std::vector<std::string>& stage_starts,
                                                const std::string& what);

// The first node of each stage after the first that balances `node_costs` (one per node of the
// graph, in order: any unit) over `stages` stages: the cut whose most expensive stage is the
// cheapest (ties: the earliest cut). Needs 1 <= stages <= node count.
std::vector<size_t> balanced_stage_starts(const std::vector<double>& node_costs, int stages);

// `node_costs` with each stage's nodes scaled so that the stage's sum is its measured time
// `stage_s` (the stages cut at `starts`, as balanced_stage_starts gives them): costs measured
// on the whole model alone mispredict the stages as they run (each on its own core, beside the
// others, switching activation sets), and a cut balanced on the rescaled costs moves by what the
// stages measured. A stage whose costs sum to 0, or whose time is not positive, keeps its costs.
// Throws crest::Error (usage) when `stage_s` has not one time per stage or `starts` are not in
// order within the nodes.
std::vector<double> costs_scaled_to_stages(const std::vector<double>& node_costs,
                                           const std::vector<size_t>& starts,
                                           const std::vector<double>& stage_s);

}  // namespace crest
