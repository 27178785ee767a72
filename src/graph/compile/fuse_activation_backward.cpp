// An activation fused into its producer (choose_fusions.cpp) still runs its own backward, in
// place on the gradient, unless the producer's backward applies it as well
// (Layer::backward_applies_post_op: oneDNN's batch norm with fuse_norm_relu keeps the ReLU's mask
// and applies it to the gradient it reads). Then the activation's backward is skipped, provided
// the producer reads the very gradient the activation would have written: the two gradients
// share storage (grad_inplace, plan_storage.cpp) and the activation accumulates nothing.
// Where those conditions fail the activation's backward runs; applying the same mask twice
// changes nothing, so either way the result is the same.
#include "compile/program.hpp"

namespace crest::compile {

void fuse_activation_backward(Program& p) {
  for (auto& op : p.ops) {
    if (!op->fused_into_producer || !op->run_backward || !op->grad_inplace) continue;
    if (!op->accum.empty() || op->channel_sum) continue;
    const int producer = p.val(op->in.at(0)).producer;
    if (producer < 0) continue;
    const Op& prod = p.op(producer);
    op->backward_in_producer = prod.run_backward && prod.layer->backward_applies_post_op();
  }
}

}  // namespace crest::compile
