// VectorOps over 16-bit activations (bf16 or f16, mixed precision), shared by the CPU backends:
// the element-wise work between 16-bit layers (dropout, copies, the sums of gradients of values
// read by several layers). Each element is widened to float, computed as the float32 ops compute
// it, and rounded back to nearest even exactly as crest/core/bf16.hpp and fp16.hpp round.
// Losses, metrics and optimizers never see 16-bit values (src/graph/compile/assign_precision.cpp
// keeps them in float32): those operations refuse, naming themselves.
#pragma once
#include <memory>

#include "crest/backends/kernels.hpp"

namespace crest {

std::unique_ptr<VectorOps> make_half_vector_ops(DType dtype);

}  // namespace crest
