// The weight gradient of a 3-D convolution (no groups) on channels-last float32 activations,
// computed directly by crest's AVX2 + FMA loops: for every kernel tap, dW[tap][ic][oc] sums
// X[the tap's input point][ic] * dY[output point][oc] over the output points whose input lies
// inside the volume. A register tile of 6 input x 16 output channels stays in registers while a
// run of output points streams past it (without dilation along w, the 6 are columns of the
// contiguous [kw][in channel] run of a tap row, so few input channels still fill a tile). Every
// tile of a thread walks one block of output rows (about 32 points or more) before the next, so
// the block's output gradient and input rows stay in L1 while the tiles go by; each tile's float
// sums carry over from block to block through a chunk of about 1024 points, and the chunks' sums
// add up in double.
//
// Why: on AVX2 CPUs (AMD Zen 2/3, the CPUs of Perlmutter, Frontier and Polaris) oneDNN 3.2 has
// no direct 3-D backward-weights kernel: channels-last gets im2col + GEMM (`x64:gemm:jit`) and
// the blocked layouts reference code. That pass held CosmoFlow's training step at 72-85 % of the
// AVX2 GEMM peak (docs/performance.md). conv.cpp uses this only where oneDNN's own choice for the
// pass is GEMM, and only at the AVX2 level or wider (CREST_MAX_CPU_ISA caps it like oneDNN).
//
// Each tile's sum runs in one fixed order (point by point through the rows), whichever thread
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
  // Lanes per tile: input columns broadcast per point.
  static constexpr int kMaxLanes = 6;
  // One register tile: `lanes` (1-6) input columns from col0 of a run of taps along w (the run's
  // columns are [kw][in channel], kw from the run's first tap `tap`), `oc_vectors` (1-2) times 8
  // output channels from oc0.
  struct Tile {
    int tap = 0;
    int64_t col0 = 0, oc0 = 0;
    int lanes = 0, oc_vectors = 0;
    // Per lane, the outputs along w whose input lies inside; their union [w_lo, w_hi) and
    // intersection [all_lo, all_hi), where the lanes read without a check.
    int64_t lane_lo[kMaxLanes] = {}, lane_hi[kMaxLanes] = {};
    int64_t w_lo = 0, w_hi = 0, all_lo = 0, all_hi = 0;
  };

 private:
  ConvDesc d_;
  std::vector<Tap> taps_;
  std::vector<Tile> tiles_;
  int64_t chunk_rows_ = 1;  // output rows (n, od, oh) per chunk: a multiple of block_rows_
  int64_t block_rows_ = 1;  // output rows per block

  Tile make_tile(int tap, int64_t col0, int64_t oc0) const;
};

}  // namespace crest::onednn
