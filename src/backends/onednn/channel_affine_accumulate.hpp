// dst += a[c] * (x - center[c]) + b[c] element-wise, for two tensors in one oneDNN layout:
// synchronised batch norm's correction of a oneDNN input gradient (onednn/batch_norm.cpp).
// oneDNN 2.6's binary primitive broadcasts a per-channel operand over a blocked layout only with
// its reference code (about 13x slower than the batch-norm backward itself), so this is an OpenMP
// loop over the layouts batch norm runs on: plain, channels-last, and blocked on channels only
// (nChw16c).
#pragma once
#include <array>
#include <cstdint>
#include <oneapi/dnnl/dnnl.hpp>

namespace crest::onednn {

class ChannelAffineAccumulate {
 public:
  // Whether `md` is an f32 activation layout [N, C, spatial...] (1 to 3 spatial dimensions) with
  // at most one inner block, on the channels.
  static bool supports(const dnnl::memory::desc& md);

  ChannelAffineAccumulate() = default;
  explicit ChannelAffineAccumulate(const dnnl::memory::desc& md);  // requires supports(md)

  // center, a and b: plain [C] (centring x first keeps float precision where |x| >> its spread).
  // Padding channels of a blocked layout are not touched.
  struct Coefficients {
    const float* center;
    const float* a;
    const float* b;
  };
  void run(const float* x, const Coefficients& k, float* dst) const;

 private:
  void channels_innermost(const float* x, const Coefficients& k, float* dst) const;
  void channel_blocks_outermost(const float* x, const Coefficients& k, float* dst) const;

  int64_t n_ = 0, channels_ = 0, block_ = 1;  // block: channels per inner block (1: none)
  int64_t stride_n_ = 0, stride_block_ = 0;   // strides of a sample and of a channel block
  std::array<int64_t, 3> size_{1, 1, 1}, stride_{0, 0, 0};  // spatial, padded to 3 dims
};

}  // namespace crest::onednn
