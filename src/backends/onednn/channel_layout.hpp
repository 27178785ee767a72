// The activation layouts crest's own loops walk in oneDNN's memory: [N, C, spatial...] (1 to 3
// spatial dimensions), f32, bf16 or f16, plain, channels-last, or blocked on the channels only
// (nChw16c).
// Shared by the loops oneDNN has no fast primitive for: synchronised batch norm's correction
// (ChannelAffineAccumulate) and per-channel sums (channel_sum.cpp).
#pragma once
#include <array>
#include <cstdint>
#include <oneapi/dnnl/dnnl.hpp>

namespace crest::onednn {

struct ChannelLayout {
  // Whether `md` is such a layout.
  static bool supports(const dnnl::memory::desc& md);

  ChannelLayout() = default;
  explicit ChannelLayout(const dnnl::memory::desc& md);  // requires supports(md)

  // The channels of one position are contiguous (channels-last, or plain with one channel).
  bool channels_innermost() const { return block == 1 && stride_block == 1; }
  // Channel blocks, each `block` wide (1: none); the last may be short.
  int64_t blocks() const { return (channels + block - 1) / block; }
  // Offset of sample n, channel block cb, spatial position (i, j, l).
  int64_t offset(int64_t sample, int64_t cb, int64_t i, int64_t j, int64_t l) const {
    return sample * stride_n + cb * stride_block + i * stride[0] + j * stride[1] + l * stride[2];
  }

  dnnl::memory::data_type dtype = dnnl::memory::data_type::f32;
  int64_t n = 0, channels = 0, block = 1;  // block: channels per inner block (1: none)
  int64_t stride_n = 0, stride_block = 0;  // strides of a sample and of a channel block
  std::array<int64_t, 3> size{1, 1, 1}, stride{0, 0, 0};  // spatial, right-aligned to 3 dims
};

}  // namespace crest::onednn
