// The weight gradient of a 2-D convolution (stride 1, no groups) in channels-last layouts, one
// kernel tap at a time: for each tap, the output pixels whose input at that tap's offset lies
// inside the input are gathered into rows, and one oneDNN matmul gives the tap's slice,
// dW[:, :, tap] = dY^T X over those rows. Taps that read padding for some pixels simply have
// fewer rows, so only the arithmetic that touches data is done.
//
// Why: for some dilated convolutions oneDNN 3.2 has no direct backward-weights kernel in any
// layout: DeepCAM's aspp2 (2048 -> 256 channels, 3x3, dilation 6) on the 12x18 feature map of a
// 192x288 input gets `x64:gemm:jit` in channels-last (10-12 ms, bf16) and reference code in the
// blocked layouts. The matmuls run at the bf16 GEMM's speed (about 900 GFLOP/s here).
// conv.cpp uses this only where oneDNN's own choice for the pass is GEMM.
#pragma once
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <vector>

#include "crest/backends/kernels.hpp"
#include "onednn/context.hpp"
#include "onednn/primitive.hpp"
#include "onednn/weight_grad_kernel.hpp"

namespace crest::onednn {

class TapwiseWeightGrad final : public WeightGradKernel {
 public:
  // Whether `d` is such a convolution and src/dst are dense channels-last (`src`, `dst`: the
  // layouts the kernel chose).
  static bool applies(const ConvDesc& d, const dnnl::memory::desc& src,
                      const dnnl::memory::desc& dst);

  TapwiseWeightGrad(const ContextPtr& ctx, const ConvDesc& d);

  size_t scratch_bytes() const override { return scratch_; }
  // Overwrites the plain float32 [out, in, kh, kw] gradient.
  void run(const void* src, const void* diff_dst, float* diff_weights, void* scratch) override;
  std::string name() const override { return "tap-wise matmuls"; }

 private:
  // One tap: its input offset and the rectangle of output pixels whose input is inside.
  struct Tap {
    int64_t dh = 0, dw = 0;
    int64_t oh0 = 0, oh1 = 0, ow0 = 0, ow1 = 0;
    int64_t rows = 0;  // n * (oh1 - oh0) * (ow1 - ow0)
    BoundPrimitive matmul;
  };
  void gather(const Tap& t, const char* src, const char* diff_dst, char* x, char* y) const;

  ConvDesc d_;
  size_t element_ = 0;  // bytes of one activation
  std::vector<Tap> taps_;
  int64_t max_rows_ = 0;
  size_t matmul_scratch_ = 0;  // the largest tap matmul's scratchpad
  size_t scratch_ = 0;
};

}  // namespace crest::onednn
