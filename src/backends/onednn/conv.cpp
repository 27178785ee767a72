// One kernel template serves convolution and deconvolution: oneDNN gives both the same
// descriptor shape, and crest's transposed weights [in, out/g, k...] are just a strided view of
// oneDNN's logical deconvolution weights [g, out/g, in/g, k...].
#include "onednn/conv.hpp"

#include <algorithm>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "onednn/eltwise.hpp"
#include "onednn/format.hpp"
#include "onednn/primitive.hpp"

namespace crest::onednn {

using dnnl::memory;
using tag = memory::format_tag;

namespace {

struct Convolution {
  using Fwd = dnnl::convolution_forward;
  using BwdData = dnnl::convolution_backward_data;
  using BwdWeights = dnnl::convolution_backward_weights;
  static constexpr dnnl::algorithm kAlgorithm = dnnl::algorithm::convolution_direct;
  static constexpr const char* kName = "convolution";
};

struct Deconvolution {
  using Fwd = dnnl::deconvolution_forward;
  using BwdData = dnnl::deconvolution_backward_data;
  using BwdWeights = dnnl::deconvolution_backward_weights;
  static constexpr dnnl::algorithm kAlgorithm = dnnl::algorithm::deconvolution_direct;
  static constexpr const char* kName = "deconvolution";
};

// Everything about the problem that does not depend on the layouts chosen.
struct Geometry {
  memory::dims src, dst, weights, bias, strides, dilates, pad_l, pad_r;
  memory::desc weights_plain;  // crest's plain parameter layout, seen with oneDNN's logical dims
  memory::data_type dt;        // the activations'
  memory::data_type param_dt;  // the parameters' and their gradients': f32 under mixed precision
  std::string text;            // for messages
};

Geometry geometry(const ConvDesc& d) {
  if (d.spatial_rank < 1 || d.spatial_rank > 3)
    throw_usage("convolution spatial rank must be 1, 2 or 3, got " +
                std::to_string(d.spatial_rank));
  if (d.groups < 1 || d.in_channels % d.groups != 0 || d.out_channels % d.groups != 0)
    throw_usage("convolution channels " + std::to_string(d.in_channels) + " -> " +
                std::to_string(d.out_channels) + " are not divisible by groups " +
                std::to_string(d.groups));
  Geometry g;
  g.dt = to_dnnl(d.dtype);
  g.param_dt = to_dnnl(master_dtype(d.dtype));
  const auto r = static_cast<size_t>(d.spatial_rank);
  g.src = {d.n, d.in_channels};
  g.dst = {d.n, d.out_channels};
  const bool grouped = d.groups > 1;
  if (grouped) g.weights = {d.groups};
  g.weights.push_back(d.out_channels / d.groups);
  g.weights.push_back(d.in_channels / d.groups);
  for (size_t i = 0; i < r; ++i) {
    g.src.push_back(d.in_size[i]);
    g.dst.push_back(d.out_size[i]);
    g.weights.push_back(d.kernel[i]);
    g.strides.push_back(d.stride[i]);
    if (d.dilation[i] < 1) throw_usage("convolution dilation must be >= 1 (1 means dense)");
    g.dilates.push_back(d.dilation[i] - 1);  // oneDNN counts the holes: 0 means dense
    g.pad_l.push_back(d.pad_lo[i]);
    g.pad_r.push_back(d.pad_hi[i]);
  }
  if (d.bias) g.bias = {d.out_channels};

  // Physical order of crest's weights: [out, in/g, k...] for convolution (oneDNN's own order)
  // and [in, out/g, k...] = [g, in/g, out/g, k...] for deconvolution (out and in swapped).
  std::vector<int> order(g.weights.size());
  std::iota(order.begin(), order.end(), 0);
  if (d.transposed) {
    const size_t o = grouped ? 1 : 0;
    std::swap(order[o], order[o + 1]);
  }
  g.weights_plain = memory::desc(g.weights, g.param_dt, strides_for_order(g.weights, order));

  auto list = [](const memory::dims& v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) {
      if (i > 0) s += 'x';
      s += std::to_string(v[i]);
    }
    return s;
  };
  g.text = "src " + list(g.src) + " weights " + list(g.weights) + " dst " + list(g.dst) +
           " stride " + list(g.strides) + " dilation " + list(g.dilates) + " pad " + list(g.pad_l) +
           "/" + list(g.pad_r) + (d.bias ? " bias" : "");
  return g;
}

bool is_reference_impl(const dnnl::primitive_desc_base& pd) {
  return std::string(pd.impl_info_str()).rfind("ref", 0) == 0;
}

// The three primitives of one layout choice (src and dst formats are shared by all three: the
// gradient of a tensor has the tensor's format).
template <typename Family>
struct Choice {
  typename Family::Fwd::primitive_desc fwd;
  typename Family::BwdData::primitive_desc bwd_data;
  typename Family::BwdWeights::primitive_desc bwd_weights;
  int reference_impls = 0;  // how many of the three only oneDNN's slow reference code offers
};

template <typename Family>
class OneDnnConv final : public ConvKernel {
 public:
  OneDnnConv(ContextPtr ctx, const ConvDesc& d, const MemFormat& src_hint)
      : ctx_(std::move(ctx)), has_bias_(d.bias), has_bias_grad_(d.bias && d.bias_grad) {
    const Geometry g = geometry(d);
    what_ = std::string(Family::kName) + " " + g.text;
    // 16-bit activations: the kernels read 16-bit weights (converted from the float32 master
    // weights by the weight bridges below, once per call) and float32 bias, and write float32
    // weight and bias gradients, which oneDNN accumulates in float32.
    const memory::desc any_wei(g.weights, g.dt, tag::any);
    const memory::desc any_diff_wei(g.weights, g.param_dt, tag::any);
    const memory::desc bias_md = d.bias ? memory::desc(g.bias, g.param_dt, tag::a) : memory::desc();
    // The weight gradient's primitive computes the bias gradient only when asked: without it
    // (the compile step sums it elsewhere) conv1 of CosmoFlow saves ~12 % of its time.
    const memory::desc diff_bias_md = d.bias && d.bias_grad ? bias_md : memory::desc();

    dnnl::primitive_attr attr = user_scratchpad_attr();
    if (d.post_op.kind != EltwiseKind::none) {
      const EltwiseAlgorithm a = eltwise_algorithm(d.post_op);
      dnnl::post_ops ops;
      ops.append_eltwise(a.forward, a.alpha, a.beta);
      attr.set_post_ops(ops);
    }

    // All three passes for one (src, dst) layout pair; may throw dnnl::error (unimplemented).
    auto make_choice = [&](const memory::desc& src, const memory::desc& dst) {
      typename Family::Fwd::primitive_desc fpd(ctx_->engine, dnnl::prop_kind::forward_training,
                                               Family::kAlgorithm, src, any_wei, bias_md, dst,
                                               g.strides, g.dilates, g.pad_l, g.pad_r, attr);
      const memory::desc s = fpd.src_desc(), t = fpd.dst_desc();
      Choice<Family> c{fpd,
                       {ctx_->engine, Family::kAlgorithm, s, any_wei, t, g.strides, g.dilates,
                        g.pad_l, g.pad_r, fpd, user_scratchpad_attr()},
                       {ctx_->engine, Family::kAlgorithm, s, any_diff_wei, diff_bias_md, t,
                        g.strides, g.dilates, g.pad_l, g.pad_r, fpd, user_scratchpad_attr()}};
      c.reference_impls = int(is_reference_impl(c.fwd)) + int(is_reference_impl(c.bwd_data)) +
                          int(is_reference_impl(c.bwd_weights));
      return c;
    };

    // Candidate layouts, best guess first. oneDNN's own forward choice (`any`) is not enough:
    // crest trains, so backward must run in the same src/dst layouts, and for some shapes only
    // oneDNN's reference code does that. The CosmoFlow conv1 class (4 input channels) is the
    // case in point: `any` picks ncdhw src, where both backward passes are reference-only, while
    // ndhwc src and dst have JIT kernels for all three passes. With few input channels per group
    // the producer's plain/channels_last layout also avoids a reorder and blocked layouts' padding
    // (4 channels stored as 16), so it is tried first.
    const Shape src_shape = to_shape(g.src), dst_shape = to_shape(g.dst);
    const memory::desc any_src(g.src, g.dt, tag::any), any_dst(g.dst, g.dt, tag::any);
    std::vector<std::pair<memory::desc, memory::desc>> candidates;
    const bool hint_usable = src_hint.layout != Layout::blocked && src_hint.shape == src_shape &&
                             src_hint.dtype == d.dtype;
    auto add_hint = [&] {
      const memory::desc hint = to_desc(src_hint);
      candidates.emplace_back(hint, layout_desc(dst_shape, d.dtype, src_hint.layout));
      candidates.emplace_back(hint, any_dst);
    };
    const bool few_channels = d.in_channels / d.groups < 16;
    if (hint_usable && few_channels) add_hint();
    candidates.emplace_back(any_src, any_dst);
    if (hint_usable && !few_channels) add_hint();
    for (Layout l : {Layout::channels_last, Layout::plain})
      candidates.emplace_back(layout_desc(src_shape, d.dtype, l),
                              layout_desc(dst_shape, d.dtype, l));

    std::optional<Choice<Family>> best;
    std::string last_error;
    for (const auto& [src, dst] : candidates) {
      try {
        Choice<Family> c = make_choice(src, dst);
        if (!best || c.reference_impls < best->reference_impls) best = std::move(c);
        if (best->reference_impls == 0) break;
      } catch (const dnnl::error& e) {
        last_error = e.what();  // no kernel for this layout pair: try the next
      }
    }
    if (!best)
      throw_runtime("oneDNN " + what_ + ": cannot create the primitives (" + last_error + ")");
    const auto& fpd = best->fwd;
    const auto& bdpd = best->bwd_data;
    const auto& bwpd = best->bwd_weights;

    const memory::desc src_md = fpd.src_desc();
    const memory::desc dst_md = fpd.dst_desc();
    src_fmt_ = to_mem_format(src_md, d.dtype);
    dst_fmt_ = to_mem_format(dst_md, d.dtype);
    what_ += " [src " + format_name(src_md) + " dst " + format_name(dst_md) + "; " +
             fpd.impl_info_str() + ", " + bdpd.impl_info_str() + ", " + bwpd.impl_info_str() + "]";

    fwd_ = BoundPrimitive(ctx_, fpd, what_ + " forward");
    fwd_.bind(DNNL_ARG_SRC, src_md);
    fwd_.bind(DNNL_ARG_WEIGHTS, fpd.weights_desc());
    if (d.bias) fwd_.bind(DNNL_ARG_BIAS, fpd.bias_desc());
    fwd_.bind(DNNL_ARG_DST, dst_md);
    wei_fwd_ = LayoutBridge(ctx_, g.weights_plain, fpd.weights_desc(), what_ + " weights");

    bwd_data_ = BoundPrimitive(ctx_, bdpd, what_ + " backward data");
    bwd_data_.bind(DNNL_ARG_DIFF_DST, dst_md);
    bwd_data_.bind(DNNL_ARG_WEIGHTS, bdpd.weights_desc());
    bwd_data_.bind(DNNL_ARG_DIFF_SRC, src_md);
    wei_bwd_data_ = LayoutBridge(ctx_, g.weights_plain, bdpd.weights_desc(), what_ + " weights");

    bwd_weights_ = BoundPrimitive(ctx_, bwpd, what_ + " backward weights");
    bwd_weights_.bind(DNNL_ARG_SRC, src_md);
    bwd_weights_.bind(DNNL_ARG_DIFF_DST, dst_md);
    bwd_weights_.bind(DNNL_ARG_DIFF_WEIGHTS, bwpd.diff_weights_desc());
    if (has_bias_grad_) {
      bwd_weights_.bind(DNNL_ARG_DIFF_BIAS, bwpd.diff_bias_desc());
      bias_bytes_ = bwpd.diff_bias_desc().get_size();
    }
    diff_wei_ =
        LayoutBridge(ctx_, bwpd.diff_weights_desc(), g.weights_plain, what_ + " weight gradient");

    scratch_ = std::max({carve_call_scratch(nullptr, wei_fwd_, fwd_, 0).used,
                         carve_call_scratch(nullptr, wei_bwd_data_, bwd_data_, 0).used,
                         carve_call_scratch(nullptr, diff_wei_, bwd_weights_, bias_bytes_).used});
  }

  MemFormat src_format() const override { return src_fmt_; }
  MemFormat dst_format() const override { return dst_fmt_; }
  size_t scratch_bytes() const override { return scratch_; }

  void forward(const void* src, const void* weights, const void* bias, void* dst,
               void* scratch) override {
    const CallScratch p = carve_call_scratch(scratch, wei_fwd_, fwd_, 0);
    if (wei_fwd_.needed()) {
      wei_fwd_.run(weights, p.converted, p.shared);
      weights = p.converted;
    }
    fwd_.set(DNNL_ARG_SRC, src);
    fwd_.set(DNNL_ARG_WEIGHTS, weights);
    if (has_bias_) {
      CREST_CHECK(bias != nullptr, what_ + ": bias expected");
      fwd_.set(DNNL_ARG_BIAS, bias);
    }
    fwd_.set(DNNL_ARG_DST, dst);
    fwd_.run(p.shared);
  }

  void backward_data(const void* diff_dst, const void* weights, void* diff_src,
                     void* scratch) override {
    const CallScratch p = carve_call_scratch(scratch, wei_bwd_data_, bwd_data_, 0);
    if (wei_bwd_data_.needed()) {
      wei_bwd_data_.run(weights, p.converted, p.shared);
      weights = p.converted;
    }
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
    if (has_bias_grad_) bwd_weights_.set(DNNL_ARG_DIFF_BIAS, diff_bias ? diff_bias : p.extra);
    bwd_weights_.run(p.shared);
    if (diff_wei_.needed()) diff_wei_.run(p.converted, diff_weights, p.shared);
  }

 private:
  ContextPtr ctx_;
  bool has_bias_, has_bias_grad_;
  std::string what_;
  MemFormat src_fmt_, dst_fmt_;
  BoundPrimitive fwd_, bwd_data_, bwd_weights_;
  LayoutBridge wei_fwd_, wei_bwd_data_, diff_wei_;
  size_t bias_bytes_ = 0;
  size_t scratch_ = 0;
};

}  // namespace

std::unique_ptr<ConvKernel> make_conv(ContextPtr ctx, const ConvDesc& d,
                                      const MemFormat& src_hint) {
  if (d.transposed) return std::make_unique<OneDnnConv<Deconvolution>>(std::move(ctx), d, src_hint);
  return std::make_unique<OneDnnConv<Convolution>>(std::move(ctx), d, src_hint);
}

}  // namespace crest::onednn
