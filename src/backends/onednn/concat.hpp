// Concatenation along channels (dim 1) and its backward split.
#pragma once
#include <memory>
#include <vector>

#include "crest/backends/kernels.hpp"
#include "onednn/context.hpp"

namespace crest::onednn {

std::unique_ptr<ConcatKernel> make_concat(ContextPtr ctx, const std::vector<MemFormat>& srcs);

}  // namespace crest::onednn
