// dst += a[c] * (x - center[c]) + b[c] element-wise, for two tensors in one oneDNN layout:
// synchronised batch norm's correction of a oneDNN input gradient (onednn/batch_norm.cpp).
// oneDNN's binary primitive (measured on 2.6) broadcasts a per-channel operand over a blocked
// layout only with its reference code (about 13x slower than the batch-norm backward itself), so
// this is an OpenMP loop over the layouts batch norm runs on: plain, channels-last, and blocked on
// channels only (nChw16c), in f32, or in bf16 / f16 (computed in float, dst rounded once).
#pragma once
#include <oneapi/dnnl/dnnl.hpp>

#include "onednn/channel_layout.hpp"

namespace crest::onednn {

class ChannelAffineAccumulate {
 public:
  // Whether `md` is a ChannelLayout.
  static bool supports(const dnnl::memory::desc& md) { return ChannelLayout::supports(md); }

  ChannelAffineAccumulate() = default;
  explicit ChannelAffineAccumulate(const dnnl::memory::desc& md) : l_(md) {}

  // center, a and b: plain [C] (centring x first keeps float precision where |x| >> its spread).
  // Padding channels of a blocked layout are not touched. x and dst in the layout's dtype.
  struct Coefficients {
    const float* center;
    const float* a;
    const float* b;
  };
  void run(const void* x, const Coefficients& k, void* dst) const;

 private:
  template <typename Element>
  void channels_innermost(const void* x, const Coefficients& k, void* dst) const;
  template <typename Element>
  void channel_blocks_outermost(const void* x, const Coefficients& k, void* dst) const;

  ChannelLayout l_;
};

}  // namespace crest::onednn
