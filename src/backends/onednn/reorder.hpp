// Format conversion between any two formats of one tensor (plain, channels_last, blocked).
#pragma once
#include <memory>
#include <vector>

#include "crest/backends/kernels.hpp"
#include "onednn/context.hpp"

namespace crest::onednn {

std::unique_ptr<ReorderKernel> make_reorder(ContextPtr ctx, const MemFormat& from,
                                            const MemFormat& to);

}  // namespace crest::onednn
