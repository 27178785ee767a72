// The kernel of the expand_as layer (crest/layers/shape_ops.hpp): one value per (sample, channel)
// broadcast over a spatial extent, and its adjoint, the sum over that extent. Registered per
// backend with CREST_REGISTER_KERNEL; a backend without one runs the reference backend's.
#pragma once
#include "crest/backends/kernels.hpp"

namespace crest {

struct ExpandDesc {
  int64_t n = 1, channels = 1, spatial = 1;  // src plain [n, channels], dst plain [n, channels,
                                             // spatial] (spatial: the product of the sizes)
  DType dtype = DType::f32;
};

class ExpandKernel {
 public:
  using Desc = ExpandDesc;
  static constexpr const char* kName = "expand";
  virtual ~ExpandKernel() = default;
  // dst[n, c, s] = src[n, c]
  virtual void forward(const void* src, void* dst) = 0;
  // diff_src[n, c] = sum over s of diff_dst[n, c, s] (overwritten)
  virtual void backward(const void* diff_dst, void* diff_src) = 0;
};

}  // namespace crest
