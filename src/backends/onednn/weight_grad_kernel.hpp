// A convolution's weight gradient computed by crest's own code instead of oneDNN's
// backward-weights primitive, where that primitive is slow for the shape: tap by tap for the
// dilated convolutions whose only oneDNN kernel is im2col + GEMM (tapwise_weight_grad.hpp), phase
// by phase for strided transposed convolutions (phase_weight_grad.hpp), and directly for 3-D
// convolutions on AVX2 CPUs (direct_weight_grad_3d.hpp). ConvPasses runs one in place of the
// primitive.
#pragma once
#include <cstddef>
#include <cstdint>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>

#include "crest/backends/kernels.hpp"

namespace crest::onednn {

class WeightGradKernel {
 public:
  virtual ~WeightGradKernel() = default;
  virtual size_t scratch_bytes() const = 0;
  // Overwrites crest's plain float32 weight gradient ([out, in, k...], or [in, out, k...] for a
  // transposed convolution) from the activations in the layouts the kernel was made for.
  virtual void run(const void* src, const void* diff_dst, float* diff_weights, void* scratch) = 0;
  // Whether the kernel also computes the bias gradient (bias_grad): only such a kernel replaces a
  // primitive that was asked for one.
  virtual bool computes_bias_grad() const { return false; }
  // Overwrites the float32 bias gradient, the sum of diff_dst over every output position.
  virtual void bias_grad(const void* diff_dst, float* diff_bias);
  // How the kernel's description names it ("tap-wise matmuls").
  virtual std::string name() const = 0;
};

// Whether src and dst (the layouts a convolution's kernel chose) are dense channels-last, the
// layout crest's weight-gradient kernels read rows of pixels from.
bool activations_channels_last(const ConvDesc& d, const dnnl::memory::desc& src,
                               const dnnl::memory::desc& dst);

// One matmul slice per kernel tap, [tap][rows][cols], into crest's weight layout
// [rows][cols][tap].
void interleave_taps(const float* per_tap, int64_t taps, int64_t rows, int64_t cols, float* out);

}  // namespace crest::onednn
