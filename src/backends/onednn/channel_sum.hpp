// The per-channel sum kernel of the oneDNN backend (channel_sum.cpp), for other kernels of the
// backend that need one: the Winograd convolution's bias gradient.
#pragma once
#include <memory>

#include "crest/backends/channel_sum_kernel.hpp"

namespace crest::onednn {

// Sums of float32 or bf16 [N, C, spatial...] tensors in `format` (plain, channels-last or blocked
// on channels), as float32 (a bf16 convolution's bias gradient is float32, as its bias); any
// other format is a usage error naming it.
std::unique_ptr<ChannelSumKernel> make_channel_sum(const MemFormat& format);

}  // namespace crest::onednn
