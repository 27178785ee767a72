// The weight gradient of a strided 2-D transposed convolution (DeepCAM's decoder upsampling) in
// channels-last layouts, phase by phase.
//
// Input pixel i reaches output s*i - p + k*dil at tap k, so along each axis a tap reads one
// phase a = (k*dil - p) mod s of the output (the pixels s*m + a) at m = i + q, with
// q = floor((k*dil - p) / s): a dense grid shifted by q. Each phase of dY is copied once into a
// zero-bordered grid, and the input into a grid of the same row length with zero columns and
// rows after it, so that every tap's pairs (x[i], dy[s*(i+q) + a]) lie at one constant offset
// between the two grids. One oneDNN matmul per tap and sample then gives the tap's slice,
// dW[:, :, tap] = X^T dY_phase, over every pixel at once; the zero border makes the pairs that
// fall outside either tensor contribute nothing.
//
// Why: oneDNN 3.2's backward-weights kernel for deconv2.0 at 768x1152 (256 -> 256 channels,
// 3x3, stride 2, 192x288 -> 384x576) runs at ~130 GFLOP/s, against ~240 for its forward and the
// matmul (docs/performance.md). The copies add ~1/9 of the data the matmuls read.
#pragma once
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <vector>

#include "crest/backends/kernels.hpp"
#include "onednn/context.hpp"
#include "onednn/primitive.hpp"
#include "onednn/weight_grad_kernel.hpp"

namespace crest::onednn {

// Below this many input or output channels a tap's matmul reads a grid per 2*ic*oc FLOPs
// that it cannot reuse enough: DeepCAM's last_deconv (256 -> 3) stays with oneDNN.
constexpr int64_t kPhaseWeightGradMinChannels = 64;

class PhaseWeightGrad final : public WeightGradKernel {
 public:
  // Whether `d` is such a convolution: 2-D, transposed, strided, not grouped, float32 or bf16,
  // both channel counts at least kPhaseWeightGradMinChannels, no bias gradient wanted, and
  // src/dst (the layouts the kernel chose) dense channels-last.
  static bool applies(const ConvDesc& d, const dnnl::memory::desc& src,
                      const dnnl::memory::desc& dst);

  PhaseWeightGrad(const ContextPtr& ctx, const ConvDesc& d);

  size_t scratch_bytes() const override { return scratch_; }
  // Overwrites the plain float32 [in, out, kh, kw] gradient.
  void run(const void* src, const void* diff_dst, float* diff_weights, void* scratch) override;
  std::string name() const override { return "phase-wise matmuls"; }

  // One spatial axis: the grids' length along it and where each tap reads.
  struct Axis {
    int64_t in = 0, out = 0, stride = 1;
    int64_t lo = 0;    // grid positions before phase position m = 0 (the most negative q)
    int64_t grid = 0;  // in + lo + the largest q: every pair of a real input pixel lies inside
    std::vector<int64_t> phase, shift;  // per tap: a and q
  };

 private:
  // The dY pixel the grid position (row, col) of phase (ah, aw) holds, or -1 for the border.
  int64_t phase_source(int64_t ah, int64_t aw, int64_t row, int64_t col) const;
  void fill_input(const char* src, int64_t n, char* grid) const;
  void fill_phase(const char* diff_dst, int64_t n, int64_t ah, int64_t aw, char* grid) const;

  ConvDesc d_;
  Axis h_, w_;
  size_t element_ = 0;                 // bytes of one activation
  int64_t grid_pixels_ = 0;            // h_.grid * w_.grid
  int64_t tail_pixels_ = 0;            // zero pixels after a phase grid: the largest tap offset
  BoundPrimitive first_, accumulate_;  // a tap's matmul for the first sample, and the others
  size_t scratch_ = 0;
};

}  // namespace crest::onednn
