// Convolution and transposed convolution (deconvolution) kernels.
#pragma once
#include <memory>

#include "crest/backends/kernels.hpp"
#include "onednn/context.hpp"

namespace crest::onednn {

std::unique_ptr<ConvKernel> make_conv(ContextPtr ctx, const ConvDesc& d, const MemFormat& src_hint);

}  // namespace crest::onednn
