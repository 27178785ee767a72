// Format conversion between any two formats of one tensor (plain, channels_last, blocked).
#pragma once
#include <memory>
#include <vector>

#include "onednn/context.hpp"
#include "crest/backends/kernels.hpp"

namespace crest::onednn {

std::unique_ptr<ReorderKernel> make_reorder(ContextPtr ctx, const MemFormat& from,
                                            const MemFormat& to);

}  // namespace crest::onednn
