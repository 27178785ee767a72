// Mixed precision (CompileOptions::half, crest.precision bf16 | fp16): which nodes compute in the
// 16-bit type. The compute-heavy layers and the cheap element-wise ones between them do, so
// activations stay 16-bit from the first convolution to the head; losses, and every kind not in
// the table (its kernels may read the values as float), stay in CompileOptions::dtype. Where two
// neighbours differ, create_kernels inserts a converting reorder, planned once: graph inputs
// arrive in float32 and are converted by the first layer's input reorder, the loss reads a
// float32 copy of the prediction, and gradients cross the same reorders backwards.
#include <algorithm>
#include <array>
#include <string_view>

#include "compile/program.hpp"

namespace crest::compile {
namespace {

// Kinds whose kernels run in bf16 and fp16 on every backend that accepts the precision. batch_norm,
// channel_affine and expand_as are registered kernels: oneDNN's batch norm takes 16-bit data with
// float32 statistics, and a backend without its own kernel runs the reference backend's, which
// emulates 16 bits for all three (a backend with no fallback would need its own). Not the losses
// (float32 by design).
constexpr std::array<std::string_view, 18> kHalfKinds = {
    {"conv", "conv_transpose", "dense", "max_pool", "avg_pool", "relu", "leaky_relu", "tanh",
     "sigmoid", "scale", "dropout", "flatten", "concat", "add", "global_avg_pool", "batch_norm",
     "channel_affine", "expand_as"}};

bool runs_in_half(const Node& n) {
  return std::find(kHalfKinds.begin(), kHalfKinds.end(), n.kind) != kHalfKinds.end();
}

}  // namespace

void assign_precision(Program& p) {
  for (Node& node : p.nodes)
    node.dtype = p.opts.half && runs_in_half(node) ? *p.opts.half : p.opts.dtype;
}

}  // namespace crest::compile
