#include "onednn/eltwise.hpp"

#include <algorithm>

#include "onednn/format.hpp"
#include "onednn/primitive.hpp"

namespace crest::onednn {

using dnnl::algorithm;

bool eltwise_supported(const EltwiseDesc& e) {
  switch (e.kind) {
    case EltwiseKind::tanh:
    case EltwiseKind::sigmoid:
    case EltwiseKind::linear:
      return true;
    case EltwiseKind::relu:
      return e.alpha >= 0.f;
    // A non-positive slope loses the sign of x, so dst no longer determines the derivative.
    case EltwiseKind::leaky_relu:
      return e.alpha > 0.f;
    case EltwiseKind::none:
      return false;
  }
  return false;
}

EltwiseAlgorithm eltwise_algorithm(const EltwiseDesc& e) {
  switch (e.kind) {
    case EltwiseKind::relu:
      // crest's relu carries an optional negative slope in alpha (normally 0).
      if (e.alpha < 0.f)
        throw_usage("relu negative slope (alpha) must be >= 0, got " + std::to_string(e.alpha));
      return {algorithm::eltwise_relu_use_dst_for_bwd, algorithm::eltwise_relu_use_dst_for_bwd,
              e.alpha, 0.f};
    case EltwiseKind::leaky_relu:
      if (!(e.alpha > 0.f))
        throw_usage("leaky_relu needs a positive slope for a dst-based backward, got alpha " +
                    std::to_string(e.alpha));
      return {algorithm::eltwise_relu_use_dst_for_bwd, algorithm::eltwise_relu_use_dst_for_bwd,
              e.alpha, 0.f};
    case EltwiseKind::tanh:
      return {algorithm::eltwise_tanh_use_dst_for_bwd, algorithm::eltwise_tanh_use_dst_for_bwd, 0.f,
              0.f};
    case EltwiseKind::sigmoid:
      return {algorithm::eltwise_logistic_use_dst_for_bwd,
              algorithm::eltwise_logistic_use_dst_for_bwd, 0.f, 0.f};
    case EltwiseKind::linear:
      // The derivative is the constant alpha, so feeding dst where oneDNN expects src is exact.
      return {algorithm::eltwise_linear, algorithm::eltwise_linear, e.alpha, e.beta};
    case EltwiseKind::none:
      // Identity: a linear map with slope 1.
      return {algorithm::eltwise_linear, algorithm::eltwise_linear, 1.f, 0.f};
  }
  throw_usage("unknown activation kind");
}

namespace {

class OneDnnEltwise final : public EltwiseKernel {
 public:
  OneDnnEltwise(ContextPtr ctx, const EltwiseDesc& d, const MemFormat& f) {
    const EltwiseAlgorithm a = eltwise_algorithm(d);
    const dnnl::memory::desc md = to_desc(f);
    const std::string what = "eltwise " + describe(md);
    guarded(what, [&] {
      const auto attr = user_scratchpad_attr();
      dnnl::eltwise_forward::primitive_desc fpd(ctx->engine, dnnl::prop_kind::forward_training,
                                                a.forward, md, md, a.alpha, a.beta, attr);
      dnnl::eltwise_backward::primitive_desc bpd(ctx->engine, a.backward, md, md, md, a.alpha,
                                                 a.beta, fpd, attr);
      fwd_ = BoundPrimitive(ctx, fpd, what + " forward");
      fwd_.bind(DNNL_ARG_SRC, md);
      fwd_.bind(DNNL_ARG_DST, md);
      bwd_ = BoundPrimitive(ctx, bpd, what + " backward");
      // The *_use_dst_for_bwd algorithms read dst; linear reads "src", for which dst is exact.
      bwd_arg_ = a.backward == algorithm::eltwise_linear ? DNNL_ARG_SRC : DNNL_ARG_DST;
      bwd_.bind(bwd_arg_, md);
      bwd_.bind(DNNL_ARG_DIFF_DST, md);
      bwd_.bind(DNNL_ARG_DIFF_SRC, md);
      // The kernel interface has no scratch argument: keep our own (eltwise needs none today).
      own_scratch_ = Buffer(std::max(fwd_.scratchpad_bytes(), bwd_.scratchpad_bytes()));
    });
  }

  void forward(const void* src, void* dst) override {
    fwd_.set(DNNL_ARG_SRC, src);
    fwd_.set(DNNL_ARG_DST, dst);
    fwd_.run(own_scratch_.data());
  }

  void backward(const void* dst, const void* diff_dst, void* diff_src) override {
    bwd_.set(bwd_arg_, dst);
    bwd_.set(DNNL_ARG_DIFF_DST, diff_dst);
    bwd_.set(DNNL_ARG_DIFF_SRC, diff_src);
    bwd_.run(own_scratch_.data());
  }

 private:
  BoundPrimitive fwd_, bwd_;
  int bwd_arg_ = DNNL_ARG_DST;
  Buffer own_scratch_;
};

}  // namespace

std::unique_ptr<EltwiseKernel> make_eltwise(ContextPtr ctx, const EltwiseDesc& d,
                                            const MemFormat& f) {
  return std::make_unique<OneDnnEltwise>(std::move(ctx), d, f);
}

}  // namespace crest::onednn
