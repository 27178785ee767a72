// Flat-buffer operations oneDNN has no primitive for (losses, dropout, sums, optimizer updates),
// as OpenMP-parallel vectorisable loops.
#pragma once
#include <memory>

#include "crest/backends/kernels.hpp"

namespace crest::onednn {

std::unique_ptr<VectorOps> make_vector_ops(DType dtype);

}  // namespace crest::onednn
