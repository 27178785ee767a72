#include "onednn/conv_passes.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

namespace crest::onednn {

ConvPasses::ConvPasses(const ContextPtr& ctx, const dnnl::primitive_desc_base& fwd,
                       const dnnl::primitive_desc_base& bwd_data,
                       const dnnl::primitive_desc_base& bwd_weights, const WeightLayout& weights,
                       bool bias, bool bias_grad, std::string what)
    : has_bias_(bias),
      has_bias_grad_(bias && bias_grad),
      what_(std::move(what)),
      src_md_(fwd.src_desc()),
      dst_md_(fwd.dst_desc()) {
  fwd_ = BoundPrimitive(ctx, fwd, what_ + " forward");
  fwd_.bind(DNNL_ARG_SRC, src_md_);
  fwd_.bind(DNNL_ARG_WEIGHTS, fwd.weights_desc());
  if (has_bias_) fwd_.bind(DNNL_ARG_BIAS, fwd.weights_desc(1));
  fwd_.bind(DNNL_ARG_DST, dst_md_);
  wei_fwd_ = LayoutBridge(ctx, weights.window, fwd.weights_desc(), what_ + " weights");

  bwd_data_ = BoundPrimitive(ctx, bwd_data, what_ + " backward data");
  bwd_data_.bind(DNNL_ARG_DIFF_DST, dst_md_);
  bwd_data_.bind(DNNL_ARG_WEIGHTS, bwd_data.weights_desc());
  bwd_data_.bind(DNNL_ARG_DIFF_SRC, src_md_);
  wei_bwd_data_ = LayoutBridge(ctx, weights.window, bwd_data.weights_desc(), what_ + " weights");

  bwd_weights_ = BoundPrimitive(ctx, bwd_weights, what_ + " backward weights");
  bwd_weights_.bind(DNNL_ARG_SRC, src_md_);
  bwd_weights_.bind(DNNL_ARG_DIFF_DST, dst_md_);
  bwd_weights_.bind(DNNL_ARG_DIFF_WEIGHTS, bwd_weights.diff_weights_desc());
  if (has_bias_grad_) {
    bwd_weights_.bind(DNNL_ARG_DIFF_BIAS, bwd_weights.diff_weights_desc(1));
    bias_bytes_ = bwd_weights.diff_weights_desc(1).get_size();
  }
  diff_wei_ = LayoutBridge(ctx, bwd_weights.diff_weights_desc(), weights.window,
                           what_ + " weight gradient");
  // oneDNN 3.2's bf16 backward-weights kernel for AVX-512 BF16 without AMX gave NaN weight
  // gradients from stale scratchpad bytes (the arena shares scratch with dead activations) where
  // it raced, on outputs two voxels deep (conv.cpp skips it there; OneDnnConv.
  // Bf16WeightGradientIsDeterministic). Zeroed before each call, its scratchpad holds what fresh
  // memory would elsewhere too.
  zero_scratchpad_ = std::string(bwd_weights.impl_info_str()).rfind("jit_bf16:", 0) == 0;
  if (weights.windowed()) zeroed_grad_bytes_ = weights.whole.get_size();

  scratch_ = std::max({carve_call_scratch(nullptr, wei_fwd_, fwd_, 0).used,
                       carve_call_scratch(nullptr, wei_bwd_data_, bwd_data_, 0).used,
                       carve_call_scratch(nullptr, diff_wei_, bwd_weights_, bias_bytes_).used});
}

void ConvPasses::forward(const void* src, const void* weights, const void* bias, void* dst,
                         void* scratch) {
  const CallScratch p = carve_call_scratch(scratch, wei_fwd_, fwd_, 0);
  weights = bridged_weights(wei_fwd_, weights, p);
  fwd_.set(DNNL_ARG_SRC, src);
  fwd_.set(DNNL_ARG_WEIGHTS, weights);
  if (has_bias_) {
    CREST_CHECK(bias != nullptr, what_ + ": bias expected");
    fwd_.set(DNNL_ARG_BIAS, bias);
  }
  fwd_.set(DNNL_ARG_DST, dst);
  fwd_.run(p.shared);
}

void ConvPasses::backward_data(const void* diff_dst, const void* weights, void* diff_src,
                               void* scratch) {
  const CallScratch p = carve_call_scratch(scratch, wei_bwd_data_, bwd_data_, 0);
  weights = bridged_weights(wei_bwd_data_, weights, p);
  bwd_data_.set(DNNL_ARG_DIFF_DST, diff_dst);
  bwd_data_.set(DNNL_ARG_WEIGHTS, weights);
  bwd_data_.set(DNNL_ARG_DIFF_SRC, diff_src);
  bwd_data_.run(p.shared);
}

void ConvPasses::use_weight_grad(std::shared_ptr<WeightGradKernel> k) {
  CREST_CHECK((!has_bias_grad_ || k->computes_bias_grad()) && zeroed_grad_bytes_ == 0,
              what_ + ": " + k->name() + " computes no tap window" +
                  (has_bias_grad_ && !k->computes_bias_grad() ? " and no bias gradient" : ""));
  scratch_ = std::max(scratch_, k->scratch_bytes());
  own_weight_grad_ = std::move(k);
}

void ConvPasses::backward_weights(const void* src, const void* diff_dst, void* diff_weights,
                                  void* diff_bias, void* scratch) {
  if (own_weight_grad_) {
    own_weight_grad_->run(src, diff_dst, static_cast<float*>(diff_weights), scratch);
    if (has_bias_grad_ && diff_bias)
      own_weight_grad_->bias_grad(diff_dst, static_cast<float*>(diff_bias));
    return;
  }
  const CallScratch p = carve_call_scratch(scratch, diff_wei_, bwd_weights_, bias_bytes_);
  if (zeroed_grad_bytes_ > 0) std::memset(diff_weights, 0, zeroed_grad_bytes_);  // the dead taps
  bwd_weights_.set(DNNL_ARG_SRC, src);
  bwd_weights_.set(DNNL_ARG_DIFF_DST, diff_dst);
  bwd_weights_.set(DNNL_ARG_DIFF_WEIGHTS, diff_wei_.needed() ? p.converted : diff_weights);
  if (has_bias_grad_) bwd_weights_.set(DNNL_ARG_DIFF_BIAS, diff_bias ? diff_bias : p.extra);
  if (zero_scratchpad_) std::memset(p.shared, 0, bwd_weights_.scratchpad_bytes());
  bwd_weights_.run(p.shared);
  if (diff_wei_.needed()) diff_wei_.run(p.converted, diff_weights, p.shared);
}

}  // namespace crest::onednn
