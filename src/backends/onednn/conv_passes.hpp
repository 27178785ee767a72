// The three bound primitives of one convolution layout choice (forward, backward data, backward
// weights) with the weight layout bridges each call runs: what a conv kernel executes, and what
// the layout tuner times for each candidate.
#pragma once
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>

#include "onednn/context.hpp"
#include "onednn/primitive.hpp"
#include "onednn/weight_grad_kernel.hpp"

namespace crest::onednn {

// crest's plain weight tensor, and the window of it the primitives compute with: all of it, or
// the live taps when the dead ones were trimmed (tap_window.hpp). The gradient outside the
// window is zero.
struct WeightLayout {
  dnnl::memory::desc whole, window;
  bool windowed() const { return whole != window; }
};

class ConvPasses {
 public:
  ConvPasses() = default;
  // The descriptors must share src and dst layouts (the gradient of a tensor has the tensor's
  // layout); `weights` is crest's parameter layout. `what` names it in errors.
  ConvPasses(const ContextPtr& ctx, const dnnl::primitive_desc_base& fwd,
             const dnnl::primitive_desc_base& bwd_data,
             const dnnl::primitive_desc_base& bwd_weights, const WeightLayout& weights, bool bias,
             bool bias_grad, std::string what);

  const dnnl::memory::desc& src_desc() const { return src_md_; }
  const dnnl::memory::desc& dst_desc() const { return dst_md_; }
  // Enough for any one call's weight copy, bias gradient and scratchpads.
  size_t scratch_bytes() const { return scratch_; }

  void forward(const void* src, const void* weights, const void* bias, void* dst, void* scratch);
  void backward_data(const void* diff_dst, const void* weights, void* diff_src, void* scratch);
  void backward_weights(const void* src, const void* diff_dst, void* diff_weights, void* diff_bias,
                        void* scratch);
  // Computes the weight gradient with `k` instead of the backward-weights primitive.
  void use_weight_grad(std::shared_ptr<WeightGradKernel> k);

 private:
  bool has_bias_ = false, has_bias_grad_ = false;
  std::string what_;
  dnnl::memory::desc src_md_, dst_md_;
  BoundPrimitive fwd_, bwd_data_, bwd_weights_;
  LayoutBridge wei_fwd_, wei_bwd_data_, diff_wei_;
  size_t bias_bytes_ = 0;
  size_t zeroed_grad_bytes_ = 0;  // a windowed gradient's whole tensor, zeroed before the window
  bool zero_scratchpad_ = false;  // backward weights reads stale scratchpad bytes (conv_passes.cpp)
  std::shared_ptr<WeightGradKernel> own_weight_grad_;  // replaces bwd_weights_ when set
  size_t scratch_ = 0;
};

}  // namespace crest::onednn
