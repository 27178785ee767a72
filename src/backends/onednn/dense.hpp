// Fully connected (inner product) kernel.
#pragma once
#include <memory>

#include "crest/backends/kernels.hpp"
#include "onednn/context.hpp"

namespace crest::onednn {

std::unique_ptr<DenseKernel> make_dense(ContextPtr ctx, const DenseDesc& d);

}  // namespace crest::onednn
