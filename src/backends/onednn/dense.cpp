#include "onednn/dense.hpp"

#include <algorithm>
#include <string>

#include "onednn/format.hpp"
#include "onednn/primitive.hpp"

namespace crest::onednn {

using dnnl::memory;
using tag = memory::format_tag;

namespace {

class OneDnnDense final : public DenseKernel {
 public:
  OneDnnDense(ContextPtr ctx, const DenseDesc& d) : has_bias_(d.bias) {
    const auto dt = to_dnnl(d.dtype);
    // 16-bit activations: float32 master weights, bias and gradients (as conv.cpp).
    const auto param_dt = to_dnnl(master_dtype(d.dtype));
    what_ = "inner product [" + std::to_string(d.n) + ", " + std::to_string(d.in_features) +
            "] -> [" + std::to_string(d.n) + ", " + std::to_string(d.out_features) + "]";
    const memory::desc src_md({d.n, d.in_features}, dt, tag::ab);
    const memory::desc dst_md({d.n, d.out_features}, dt, tag::ab);
    const memory::desc wei_plain({d.out_features, d.in_features}, param_dt, tag::ab);
    const memory::desc wei_any({d.out_features, d.in_features}, dt, tag::any);
    // The weights the forward and backward-data kernels read, plain: the parameters themselves
    // in float32, a converted copy for 16-bit activations.
    const memory::desc wei_read({d.out_features, d.in_features}, dt, tag::ab);
    const memory::desc diff_wei_any({d.out_features, d.in_features}, param_dt, tag::any);
    const memory::desc bias_md =
        d.bias ? memory::desc({d.out_features}, param_dt, tag::a) : memory::desc();

    // Plain weights first (the GEMM-based kernels take them as they are); only if no kernel
    // does, let oneDNN choose and reorder per call.
    auto forward_pd = [&](const memory::desc& wei) {
      return dnnl::inner_product_forward::primitive_desc(
          ctx->engine, dnnl::prop_kind::forward_training, src_md, wei, bias_md, dst_md,
          user_scratchpad_attr());
    };
    dnnl::inner_product_forward::primitive_desc fpd;
    try {
      fpd = forward_pd(wei_read);
    } catch (const dnnl::error&) {
      fpd = guarded(what_ + " forward", [&] { return forward_pd(wei_any); });
    }
    fwd_ = BoundPrimitive(ctx, fpd, what_ + " forward");
    fwd_.bind(DNNL_ARG_SRC, src_md);
    fwd_.bind(DNNL_ARG_WEIGHTS, fpd.weights_desc());
    if (has_bias_) fwd_.bind(DNNL_ARG_BIAS, bias_md);
    fwd_.bind(DNNL_ARG_DST, dst_md);
    wei_fwd_ = LayoutBridge(ctx, wei_plain, fpd.weights_desc(), what_ + " weights");

    auto bdpd = guarded(what_ + " backward data", [&] {
      auto make = [&](const memory::desc& wei) {
        return dnnl::inner_product_backward_data::primitive_desc(ctx->engine, src_md, wei, dst_md,
                                                                 fpd, user_scratchpad_attr());
      };
      try {
        return make(wei_read);
      } catch (const dnnl::error&) {
        return make(wei_any);
      }
    });
    bwd_data_ = BoundPrimitive(ctx, bdpd, what_ + " backward data");
    bwd_data_.bind(DNNL_ARG_DIFF_DST, dst_md);
    bwd_data_.bind(DNNL_ARG_WEIGHTS, bdpd.weights_desc());
    bwd_data_.bind(DNNL_ARG_DIFF_SRC, src_md);
    wei_bwd_data_ = LayoutBridge(ctx, wei_plain, bdpd.weights_desc(), what_ + " weights");

    auto bwpd = guarded(what_ + " backward weights", [&] {
      auto make = [&](const memory::desc& wei) {
        return dnnl::inner_product_backward_weights::primitive_desc(
            ctx->engine, src_md, wei, bias_md, dst_md, fpd, user_scratchpad_attr());
      };
      try {
        return make(wei_plain);
      } catch (const dnnl::error&) {
        return make(diff_wei_any);
      }
    });
    bwd_weights_ = BoundPrimitive(ctx, bwpd, what_ + " backward weights");
    bwd_weights_.bind(DNNL_ARG_SRC, src_md);
    bwd_weights_.bind(DNNL_ARG_DIFF_DST, dst_md);
    bwd_weights_.bind(DNNL_ARG_DIFF_WEIGHTS, bwpd.diff_weights_desc());
    if (has_bias_) {
      bwd_weights_.bind(DNNL_ARG_DIFF_BIAS, bias_md);
      bias_bytes_ = bias_md.get_size();
    }
    diff_wei_ = LayoutBridge(ctx, bwpd.diff_weights_desc(), wei_plain, what_ + " weight gradient");

    scratch_ = std::max({carve_call_scratch(nullptr, wei_fwd_, fwd_, 0).used,
                         carve_call_scratch(nullptr, wei_bwd_data_, bwd_data_, 0).used,
                         carve_call_scratch(nullptr, diff_wei_, bwd_weights_, bias_bytes_).used});
  }

  size_t scratch_bytes() const override { return scratch_; }

  void forward(const void* src, const void* weights, const void* bias, void* dst,
               void* scratch) override {
    const CallScratch p = carve_call_scratch(scratch, wei_fwd_, fwd_, 0);
    weights = bridged_weights(wei_fwd_, weights, p);
    fwd_.set(DNNL_ARG_SRC, src);
    fwd_.set(DNNL_ARG_WEIGHTS, weights);
    if (has_bias_) fwd_.set(DNNL_ARG_BIAS, bias);
    fwd_.set(DNNL_ARG_DST, dst);
    fwd_.run(p.shared);
  }

  void backward_data(const void* diff_dst, const void* weights, void* diff_src,
                     void* scratch) override {
    const CallScratch p = carve_call_scratch(scratch, wei_bwd_data_, bwd_data_, 0);
    weights = bridged_weights(wei_bwd_data_, weights, p);
    bwd_data_.set(DNNL_ARG_DIFF_DST, diff_dst);
    bwd_data_.set(DNNL_ARG_WEIGHTS, weights);
    bwd_data_.set(DNNL_ARG_DIFF_SRC, diff_src);
    bwd_data_.run(p.shared);
  }

  void backward_weights(const void* src, const void* diff_dst, void* diff_weights, void* diff_bias,
                        void* scratch) override {
    const CallScratch p = carve_call_scratch(scratch, diff_wei_, bwd_weights_, bias_bytes_);
    bwd_weights_.set(DNNL_ARG_SRC, src);
    bwd_weights_.set(DNNL_ARG_DIFF_DST, diff_dst);
    bwd_weights_.set(DNNL_ARG_DIFF_WEIGHTS, diff_wei_.needed() ? p.converted : diff_weights);
    if (has_bias_) bwd_weights_.set(DNNL_ARG_DIFF_BIAS, diff_bias ? diff_bias : p.extra);
    bwd_weights_.run(p.shared);
    if (diff_wei_.needed()) diff_wei_.run(p.converted, diff_weights, p.shared);
  }

 private:
  bool has_bias_;
  std::string what_;
  BoundPrimitive fwd_, bwd_data_, bwd_weights_;
  LayoutBridge wei_fwd_, wei_bwd_data_, diff_wei_;
  size_t bias_bytes_ = 0;
  size_t scratch_ = 0;
};

}  // namespace

std::unique_ptr<DenseKernel> make_dense(ContextPtr ctx, const DenseDesc& d) {
  return std::make_unique<OneDnnDense>(std::move(ctx), d);
}

}  // namespace crest::onednn
