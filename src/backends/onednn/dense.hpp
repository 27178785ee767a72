// Fully connected (inner product) kernel.
#pragma once
#include <memory>

#include "onednn/context.hpp"
#include "crest/backends/kernels.hpp"

namespace crest::onednn {

std::unique_ptr<DenseKernel> make_dense(ContextPtr ctx, const DenseDesc& d);

}  // namespace crest::onednn
