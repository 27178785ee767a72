// Max and average pooling kernels.
#pragma once
#include <memory>

#include "crest/backends/kernels.hpp"
#include "onednn/context.hpp"

namespace crest::onednn {

std::unique_ptr<PoolKernel> make_pool(ContextPtr ctx, const PoolDesc& d, const MemFormat& src_hint);

}  // namespace crest::onednn
