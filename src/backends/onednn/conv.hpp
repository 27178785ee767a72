// Convolution and transposed convolution (deconvolution) kernels.
#pragma once
#include <memory>

#include "crest/backends/kernels.hpp"
#include "onednn/context.hpp"

namespace crest::onednn {

class LayoutTuner;

// `tuner` (may be null: the fixed rule) chooses the layouts by measuring when it is active.
std::unique_ptr<ConvKernel> make_conv(ContextPtr ctx, const ConvDesc& d, const MemFormat& src_hint,
                                      LayoutTuner* tuner = nullptr);

}  // namespace crest::onednn
