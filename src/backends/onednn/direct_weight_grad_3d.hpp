// The weight gradient of a 3-D convolution (no groups) on channels-last float32 activations,
// computed directly by crest's AVX2 + FMA loops: for every kernel tap, dW[tap][ic][oc] sums
// X[the tap's input point][ic] * dY[output point][oc] over the output points whose input lies
// inside the volume. A register tile of 6 input x 16 output channels stays in registers while a
// run of output points streams past it; the points come in chunks of output rows small enough
// for the L2 cache, and every tile walks the chunk before the next chunk is read. A chunk sums in
// float from zero; the chunks' sums add up in double.
//
// Why: on AVX2 CPUs (AMD Zen 2/3, the CPUs of Perlmutter, Frontier and Polaris) oneDNN 3.2 has
// no direct 3-D backward-weights kernel: channels-last gets im2col + GEMM (`x64:gemm:jit`) and
// the blocked layouts reference code. That pass held CosmoFlow's training step at 72-85 % of the
// AVX2 GEMM peak (docs/performance.md). conv.cpp uses this only where oneDNN's own choice for the
// pass is GEMM, and only at the AVX2 level or wider (CREST_MAX_CPU_ISA caps it like oneDNN).
//
// Each tile's sum runs in one fixed order (chunk by chunk, point by point), whichever thread
// computes it: the gradient has the same bits for any thread count.
#pragma once
#include <cstdint>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <vector>

#include "crest/backends/kernels.hpp"
#include "onednn/context.hpp"
#include "onednn/weight_grad_kernel.hpp"

namespace crest::onednn {

class DirectWeightGrad3d final : public WeightGradKernel {
 public:
  // Whether `d` is a float32 3-D convolution this kernel computes, and faster than oneDNN's GEMM
  // (no groups, not transposed, output channels a multiple of 8, output rows of at least 32
  // points), src and dst (the layouts oneDNN's kernels chose) are dense
  // channels-last, and crest's loops may use AVX2 + FMA here (cpu_level()).
  static bool applies(const ConvDesc& d, const dnnl::memory::desc& src,
                      const dnnl::memory::desc& dst);
  // Whether this CPU can run the kernel at all, whatever the cap (the tests run it directly).
  static bool cpu_can_run();

  DirectWeightGrad3d(const ContextPtr& ctx, const ConvDesc& d);

  size_t scratch_bytes() const override;
  // Overwrites the plain float32 [out, in, kd, kh, kw] gradient.
  void run(const void* src, const void* diff_dst, float* diff_weights, void* scratch) override;
  std::string name() const override { return "crest direct weight gradient (AVX2)"; }
  bool computes_bias_grad() const override { return true; }
  // The bias gradient: each output channel's sum over every output point, in double.
  void bias_grad(const void* diff_dst, float* diff_bias) override;

  // A tap's input offset and, per axis, the output range [lo, hi) whose input lies inside.
  struct Tap {
    int64_t offset[3] = {0, 0, 0};
    int64_t lo[3] = {0, 0, 0}, hi[3] = {0, 0, 0};
  };
  // One register tile: a tap, `ic_count` (1-6) input channels from ic0, `oc_vectors` (1-2) times 8
  // output channels from oc0.
  struct Tile {
    int tap = 0;
    int64_t ic0 = 0, oc0 = 0;
    int ic_count = 0, oc_vectors = 0;
  };

 private:
  ConvDesc d_;
  std::vector<Tap> taps_;
  std::vector<Tile> tiles_;
  int64_t chunk_rows_ = 1;  // output rows (n, od, oh) per chunk
};

}  // namespace crest::onednn
