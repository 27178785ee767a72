// The kernel of the channel_affine layer (crest/layers/channel_affine.hpp): registered per backend
// with CREST_REGISTER_KERNEL; a backend without one runs the reference backend's.
#pragma once
#include "crest/backends/kernels.hpp"

namespace crest {

struct ChannelAffineDesc {
  int64_t n = 1, channels = 1, spatial = 1;  // plain [n, channels, spatial] memory
  bool shift = true;
  // Of src, dst and their gradients; scale, shift and their gradients are in it too, or float32
  // when it is bf16 / f16 (mixed precision keeps parameters float32).
  DType dtype = DType::f32;
};

class ChannelAffineKernel {
 public:
  using Desc = ChannelAffineDesc;
  static constexpr const char* kName = "channel_affine";
  virtual ~ChannelAffineKernel() = default;
  virtual void forward(const void* src, const void* scale, const void* shift, void* dst) = 0;
  virtual void backward_data(const void* diff_dst, const void* scale, void* diff_src) = 0;
  // Overwrites diff_scale and diff_shift (null without a shift).
  virtual void backward_weights(const void* src, const void* diff_dst, void* diff_scale,
                                void* diff_shift) = 0;
};

}  // namespace crest
