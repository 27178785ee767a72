// Fusion by pattern: a producer whose kernel can apply an activation to its output (a post-op:
// Layer::accepts_post_op, conv's and batch norm's) absorbs the activation that is its output's
// only reader, unless the activation's output is a marked output (read after the step: a
// pipeline stage's sent value), which must have storage of its own.
// The activation then runs no forward of its own; it runs in place on the shared output and
// computes its backward from it. The producer learns its post-op from CreateContext::post_op.
#include <algorithm>

#include "compile/program.hpp"

namespace crest::compile {

void choose_fusions(Program& p, const Graph& g) {
  if (!p.opts.fuse) return;
  std::vector<int> readers = p.graph_readers(g);
  auto& nodes = p.nodes;
  for (size_t a = 0; a + 1 < nodes.size(); ++a) {
    Node& producer = nodes[a];
    if (producer.outputs.size() != 1 || readers[static_cast<size_t>(producer.outputs[0])] != 1)
      continue;
    // An activation overwrites the output in place: not if the producer's backward reads it.
    if (producer.layer->backward_needs(producer.inputs.size(), 1).output[0]) continue;
    for (size_t b = a + 1; b < nodes.size(); ++b) {
      Node& act = nodes[b];
      if (act.inputs.size() != 1 || act.inputs[0] != producer.outputs[0]) continue;
      const auto& marked = g.outputs();
      if (std::find(marked.begin(), marked.end(), act.outputs[0]) != marked.end()) break;
      const auto e = act.layer->activation();
      if (e && producer.layer->accepts_post_op(p.backend, *e)) {
        producer.post_op = *e;
        act.fused_into_producer = true;
      }
      break;
    }
  }
}

}  // namespace crest::compile
