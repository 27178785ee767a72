// The per-channel sum of a tensor over batch and space: sums[c] = sum over n and x of t[n, c, x],
// in the tensor's own layout (plain, channels-last, or a backend's blocked one). The compile
// step uses it to take a convolution's bias gradient from the smaller gradient after a max
// pooling (src/graph/compile/route_bias_grad.cpp). Registered per backend with
// CREST_REGISTER_KERNEL; a backend without one runs the reference backend's (plain and
// channels-last only).
#pragma once
#include "crest/backends/kernels.hpp"

namespace crest {

struct ChannelSumDesc {
  MemFormat format;  // the summed tensor: [N, C, spatial...] in any layout of the backend
};

class ChannelSumKernel {
 public:
  using Desc = ChannelSumDesc;
  static constexpr const char* kName = "channel_sum";
  virtual ~ChannelSumKernel() = default;
  // sums[c] (C values of the tensor's dtype, overwritten; float32 for a bf16 tensor, where a
  // backend sums those) = the sum of channel c of `src`.
  virtual void run(const void* src, void* sums) = 0;
};

}  // namespace crest
