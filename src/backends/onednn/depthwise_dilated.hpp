// Dilated depthwise 2-D convolution for training, in crest's own loops.
//
// Why: oneDNN 3.2 implements dilation in its depthwise kernels (jit_dw) for the forward pass
// only. The backward passes of a dilated depthwise convolution fall to the generic grouped kernel
// (`jit:avx512_core`), which pads each group's single channel to a 16x16 weight block: 256 times
// the work, 7 ms per backward at DeepCAM 192x288 where the forward takes 0.1 ms, and about 10 % of
// a full-size (768x1152) bf16 training step over the exit flow's four such convolutions.
// The work is tiny (9 multiply-adds per element), so plain loops over 16-channel lane blocks,
// compiled for the CPU's widest vectors, are enough. Each channel is a lane of its own and its
// sums run in one fixed order, so every instruction-set copy, and every thread count, gives the
// same bits.
#pragma once
#include <memory>

#include "crest/backends/kernels.hpp"

namespace crest::onednn {

// Whether make_dilated_depthwise serves `d`: a training convolution, 2-D, not transposed, one
// output channel per input channel (groups = in = out channels, a multiple of 16), some dilation
// above 1, no fused activation, float32 or bf16 activations.
bool dilated_depthwise_applies(const ConvDesc& d);

std::unique_ptr<ConvKernel> make_dilated_depthwise(const ConvDesc& d);

}  // namespace crest::onednn
