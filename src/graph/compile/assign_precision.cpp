// Mixed precision (CompileOptions::half, crest.precision bf16 | fp16): which nodes compute in the
// 16-bit type. The compute-heavy layers and the cheap element-wise ones between them do, so
// activations stay 16-bit from the first convolution to the head; losses, and every layer that
// says no (Layer::computes_in_half: its kernels may read the values as float), stay in
// CompileOptions::dtype. batch_norm, channel_affine and expand_as are registered kernels:
// oneDNN's batch norm takes 16-bit data with float32 statistics, and a backend without its own
// kernel runs the reference backend's, which emulates 16 bits for all three. Where two
// neighbours differ, create_kernels inserts a converting reorder, planned once: graph inputs
// arrive in float32 and are converted by the first layer's input reorder, the loss reads a
// float32 copy of the prediction, and gradients cross the same reorders backwards.
#include "compile/program.hpp"

namespace crest::compile {

void assign_precision(Program& p) {
  for (Node& node : p.nodes)
    node.dtype = p.opts.half && node.layer->computes_in_half() ? *p.opts.half : p.opts.dtype;
}

}  // namespace crest::compile
