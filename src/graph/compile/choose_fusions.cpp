// Fusion by pattern, decided here and not by the layers: a producer whose kernel can apply an
// activation to its output (a post-op) absorbs the activation that is its output's only reader.
// The activation then runs no forward of its own; it runs in place on the shared output and
// computes its backward from it. The producer learns its post-op from CreateContext::post_op.
#include <algorithm>
#include <array>
#include <string_view>

#include "compile/program.hpp"
#include "crest/backends/batch_norm_kernel.hpp"

namespace crest::compile {
namespace {

// Node kinds whose kernels take a fused activation, and which activations they take: conv and
// conv_transpose (ConvKernel's post_op) whatever the backend fuses(); batch_norm the ReLU every
// BatchNormKernel applies (batch_norm_fuses()).
struct PostOpTaker {
  std::string_view kind;
  bool (*accepts)(const Backend& backend, const EltwiseDesc& e);
};

bool conv_accepts(const Backend& backend, const EltwiseDesc& e) { return backend.fuses(e); }
bool batch_norm_accepts(const Backend&, const EltwiseDesc& e) { return batch_norm_fuses(e); }

constexpr std::array<PostOpTaker, 3> kTakesPostOp = {
    {{"conv", conv_accepts}, {"conv_transpose", conv_accepts}, {"batch_norm", batch_norm_accepts}}};

const PostOpTaker* post_op_taker(const Node& n) {
  const auto it = std::find_if(kTakesPostOp.begin(), kTakesPostOp.end(),
                               [&](const PostOpTaker& t) { return t.kind == n.kind; });
  return it == kTakesPostOp.end() ? nullptr : &*it;
}

}  // namespace

void choose_fusions(Program& p, const Graph& g) {
  if (!p.opts.fuse) return;
  std::vector<int> readers = p.graph_readers(g);
  auto& nodes = p.nodes;
  for (size_t a = 0; a + 1 < nodes.size(); ++a) {
    Node& producer = nodes[a];
    const PostOpTaker* taker = post_op_taker(producer);
    if (!taker || producer.outputs.size() != 1 ||
        readers[static_cast<size_t>(producer.outputs[0])] != 1)
      continue;
    // An activation overwrites the output in place: not if the producer's backward reads it.
    if (producer.layer->backward_needs(producer.inputs.size(), 1).output[0]) continue;
    for (size_t b = a + 1; b < nodes.size(); ++b) {
      Node& act = nodes[b];
      if (act.inputs.size() != 1 || act.inputs[0] != producer.outputs[0]) continue;
      const auto e = act.layer->activation();
      if (e && taker->accepts(p.backend, *e)) {
        producer.post_op = *e;
        act.fused_into_producer = true;
      }
      break;
    }
  }
}

}  // namespace crest::compile
