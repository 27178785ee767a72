// Rewrite: a convolution's bias gradient, taken from the max pooling after it. The bias
// gradient is the per-channel sum of the convolution's output gradient, and max pooling's
// backward moves every value of its output gradient to exactly one input position (adding where
// windows overlap; never into padding), so the per-channel sums of its input and output
// gradients are equal: the sum can be taken over a tensor 2^d times smaller, and the
// convolution's weight-gradient kernel runs without its bias part. CosmoFlow's conv1 at 128^3:
// oneDNN's weight gradient 218-230 ms with the bias, 188-207 ms without; the sum over the pooled
// gradient costs a few ms (docs/performance.md).
//
// It applies when the conv (with a bias, not transposed) has no fused activation (else its
// output gradient is not the pool's input gradient) and its output is read by one max pooling
// only. The pool's op then writes the bias gradient before its own backward.
#include "compile/program.hpp"

namespace crest::compile {
namespace {

int bias_slot(const Program& p, const Node& conv) {
  for (int s : conv.param_slots)
    if (p.params.slots()[static_cast<size_t>(s)].spec.name == "bias") return s;
  return -1;
}

}  // namespace

void route_bias_grad(Program& p, const Graph& g) {
  if (!p.opts.fuse || !p.opts.training) return;
  // Under a spatial split the pool's sum would be this rank's share of the bias gradient, which
  // the split convolution's kernel scales for the data-parallel average: leave it to the kernel.
  if (p.opts.spatial && p.opts.spatial->group_size() > 1) return;
  const std::vector<int> readers = p.graph_readers(g);
  auto& nodes = p.nodes;
  for (size_t a = 0; a + 1 < nodes.size(); ++a) {
    Node& conv = nodes[a];
    // The channel_sum kernels sum float tensors: a 16-bit convolution (mixed precision) keeps
    // its bias gradient in its own weight-gradient kernel.
    if (!conv.layer->bias_grad_can_move() || conv.outputs.size() != 1 ||
        conv.post_op.kind != EltwiseKind::none ||
        readers[static_cast<size_t>(conv.outputs[0])] != 1 || is_half(conv.dtype))
      continue;
    const int slot = bias_slot(p, conv);
    if (slot < 0 || !p.params.slots()[static_cast<size_t>(slot)].spec.trainable) continue;
    for (size_t b = a + 1; b < nodes.size(); ++b) {
      Node& pool = nodes[b];
      if (pool.inputs.size() != 1 || pool.inputs[0] != conv.outputs[0]) continue;
      if (pool.layer->selects_window_maximum() && pool.outputs.size() == 1) {
        conv.bias_grad_elsewhere = true;
        pool.channel_sum_slot = slot;
      }
      break;
    }
  }
}

}  // namespace crest::compile
