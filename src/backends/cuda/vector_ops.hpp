// Flat-buffer operations on device memory (losses, dropout, sums, optimizer updates, the 16-bit
// codes for communication), as CUDA kernels issued on the backend's stream. Each element is
// computed as the reference backend computes it; reductions add in an order fixed by the element
// count alone, so a result never depends on timing.
#pragma once
#include <cuda_runtime.h>

#include <memory>

#include "crest/backends/kernels.hpp"

namespace crest::cuda {

// VectorOps on device memory for dtype f32 or f64 (the full set) and bf16 or f16 (the element-wise
// subset of half_vector_ops.hpp; the others refuse, naming themselves). Every buffer handed to the
// ops is device memory except range_sum_squares's ranges and sums, which are host arrays. Calls
// that return a value (or fill host arrays) wait for the stream; the others only enqueue work.
std::unique_ptr<VectorOps> make_vector_ops(DType dtype, cudaStream_t stream);

}  // namespace crest::cuda
