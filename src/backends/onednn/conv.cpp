// One kernel template serves convolution and deconvolution: oneDNN gives both the same
// descriptor shape, and crest's transposed weights [in, out/g, k...] are just a strided view of
// oneDNN's logical deconvolution weights [g, out/g, in/g, k...].
#include "onednn/conv.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "onednn/conv_passes.hpp"
#include "onednn/conv_timing.hpp"
#include "onednn/depthwise_dilated.hpp"
#include "onednn/direct_weight_grad_3d.hpp"
#include "onednn/eltwise.hpp"
#include "onednn/format.hpp"
#include "onednn/layout_tuner.hpp"
#include "onednn/phase_weight_grad.hpp"
#include "onednn/primitive.hpp"
#include "onednn/tap_window.hpp"
#include "onednn/tapwise_weight_grad.hpp"
#include "onednn/winograd_conv.hpp"

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
  WeightLayout weights_plain;  // crest's parameter layout, seen with oneDNN's logical dims
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
  memory::dims whole = g.weights, window_offset(g.weights.size(), 0);
  bool trimmed = false;
  for (size_t i = 0; i < r; ++i) {
    g.src.push_back(d.in_size[i]);
    g.dst.push_back(d.out_size[i]);
    if (d.dilation[i] < 1) throw_usage("convolution dilation must be >= 1 (1 means dense)");
    // Deconvolution reads its input differently; its taps are all kept.
    const TapWindow taps = d.transposed ? TapWindow{0, d.kernel[i], d.pad_lo[i], d.pad_hi[i]}
                                        : live_taps(d, static_cast<int>(i));
    trimmed = trimmed || taps.trimmed(d.kernel[i]);
    whole.push_back(d.kernel[i]);
    window_offset.push_back(taps.first);
    g.weights.push_back(taps.count);
    g.strides.push_back(d.stride[i]);
    g.dilates.push_back(d.dilation[i] - 1);  // oneDNN counts the holes: 0 means dense
    g.pad_l.push_back(taps.pad_lo);
    g.pad_r.push_back(taps.pad_hi);
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
  g.weights_plain.whole = memory::desc(whole, g.param_dt, strides_for_order(whole, order));
  g.weights_plain.window = trimmed ? g.weights_plain.whole.submemory_desc(g.weights, window_offset)
                                   : g.weights_plain.whole;

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
           "/" + list(g.pad_r) + (d.bias ? " bias" : "") +
           (trimmed ? " (live taps of " + list(whole) + ")" : "");
  return g;
}

bool is_reference_impl(const dnnl::primitive_desc_base& pd) {
  return std::string(pd.impl_info_str()).rfind("ref", 0) == 0;
}

// oneDNN 3.2's bf16 backward-weights kernel for AVX-512 BF16 without AMX
// (`jit_bf16:avx512_core_bf16`) races on two threads when the output is two voxels deep: the same
// inputs gave different weight gradients from run to run, up to 1000x off in thousands of
// elements, and NaN where its scratchpad held stale bytes (CosmoFlow's conv5 in the learnable
// fixture, 8 x 64 x 2^3, and 8 x 32 x 2^3 and 4 x 256 x 2^3; depths 1, 3, 4, 8, 16 and 32 gave
// the same bits every run; OneDnnConv.Bf16WeightGradientIsDeterministic). Such volumes take the
// next implementation oneDNN offers (its GEMM: these layers are small).
void skip_racy_weight_grad(dnnl::primitive_desc& pd, const ConvDesc& d) {
  if (d.spatial_rank != 3 || d.out_size[0] >= 4) return;
  while (std::string(pd.impl_info_str()).rfind("jit_bf16:avx512_core_bf16", 0) == 0)
    if (!pd.next_impl()) break;
}

// oneDNN's im2col + GEMM convolution ("gemm:jit"), its fallback where a layout has no direct
// kernel. `any` can land there for all three passes while channels-last has direct kernels:
// DeepCAM's aspp4 (2048 -> 256, 3x3, dilation 18) at 768x1152, ~200 ms of GEMM per bf16 step.
bool is_gemm_impl(const dnnl::primitive_desc_base& pd) {
  return std::string(pd.impl_info_str()).find("gemm") != std::string::npos;
}

// crest's own weight gradient where oneDNN's is slow for the shape (weight_grad_kernel.hpp), or
// null: tap by tap (2-D) or directly (3-D, AVX2) where oneDNN's is its GEMM fallback, phase by
// phase for strided transposed convolutions. None computes a trimmed tap window.
std::shared_ptr<WeightGradKernel> own_weight_grad(const ContextPtr& ctx, const ConvDesc& d,
                                                  const dnnl::primitive_desc_base& bwd_weights,
                                                  const WeightLayout& weights,
                                                  const memory::desc& src,
                                                  const memory::desc& dst) {
  if (weights.windowed()) return nullptr;
  if (is_gemm_impl(bwd_weights) && TapwiseWeightGrad::applies(d, src, dst))
    return std::make_shared<TapwiseWeightGrad>(ctx, d);
  if (is_gemm_impl(bwd_weights) && DirectWeightGrad3d::applies(d, src, dst))
    return std::make_shared<DirectWeightGrad3d>(ctx, d);
  if (PhaseWeightGrad::applies(d, src, dst)) return std::make_shared<PhaseWeightGrad>(ctx, d);
  return nullptr;
}

// The three primitives of one layout choice (src and dst formats are shared by all three: the
// gradient of a tensor has the tensor's format).
template <typename Family>
struct Choice {
  typename Family::Fwd::primitive_desc fwd;
  typename Family::BwdData::primitive_desc bwd_data;
  typename Family::BwdWeights::primitive_desc bwd_weights;
  int reference_impls = 0;  // how many of the three only oneDNN's slow reference code offers
  int gemm_impls = 0;       // how many of the three fall back to im2col + GEMM
  // Lower is better: any reference pass is worse than GEMM in all three.
  int slowness() const { return 4 * reference_impls + gemm_impls; }
};

// The problem as the layout tuner's cache and record know it: everything that decides which
// layouts are possible and how fast they run.
std::string tuning_problem(const char* kind, const Geometry& g, const ConvDesc& d,
                           const MemFormat& src_hint) {
  std::string p = std::string(kind) + " " + dtype_name(d.dtype) + " " + g.text;
  if (d.post_op.kind != EltwiseKind::none)
    p += " post " + std::to_string(static_cast<int>(d.post_op.kind)) + "(" +
         std::to_string(d.post_op.alpha) + "," + std::to_string(d.post_op.beta) + ")";
  p += d.bias && !d.bias_grad ? " no-bias-grad" : "";
  p += !d.training ? " inference" : (d.data_grad ? " training" : " training no-data-grad");
  p += " hint " + describe(to_desc(src_hint));
  return p;
}

// Each candidate is timed this many times, interleaved with the others (each time a warm-up call
// and the best of a few per pass, LayoutTimer).
constexpr int kTimingRounds = 2;

template <typename Family>
class OneDnnConv final : public ConvKernel {
 public:
  OneDnnConv(ContextPtr ctx, const ConvDesc& d, const MemFormat& src_hint, LayoutTuner* tuner)
      : ctx_(std::move(ctx)) {
    const Geometry g = geometry(d);
    what_ = std::string(Family::kName) + " " + g.text;
    // 16-bit activations: the kernels read 16-bit weights (converted from the float32 master
    // weights by the weight bridges, once per call) and float32 bias, and write float32
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
      skip_racy_weight_grad(c.bwd_weights, d);
      c.reference_impls = int(is_reference_impl(c.fwd)) + int(is_reference_impl(c.bwd_data)) +
                          int(is_reference_impl(c.bwd_weights));
      c.gemm_impls = int(is_gemm_impl(c.fwd)) + int(is_gemm_impl(c.bwd_data)) +
                     int(is_gemm_impl(c.bwd_weights));
      return c;
    };

    // Candidate layouts, best guess first. oneDNN's own forward choice (`any`) is not enough:
    // crest trains, so backward must run in the same src/dst layouts, and for some shapes only
    // oneDNN's reference code does that. The CosmoFlow conv1 class (4 input channels) is the
    // case in point: `any` picks ncdhw src, where both backward passes are reference-only, while
    // ndhwc src and dst have JIT kernels for all three passes. With few input channels per group
    // the producer's plain/channels_last layout also avoids a reorder and blocked layouts' padding
    // (4 channels stored as 16), so it is tried first. Each has a name the layout tuner's cache
    // and record keep.
    const Shape src_shape = to_shape(g.src), dst_shape = to_shape(g.dst);
    const memory::desc any_src(g.src, g.dt, tag::any), any_dst(g.dst, g.dt, tag::any);
    std::vector<Candidate> candidates;
    const bool hint_usable = src_hint.layout != Layout::blocked && src_hint.shape == src_shape &&
                             src_hint.dtype == d.dtype;
    auto add_hint = [&] {
      const memory::desc hint = to_desc(src_hint);
      candidates.push_back({"hint+same", hint, layout_desc(dst_shape, d.dtype, src_hint.layout)});
      candidates.push_back({"hint+any", hint, any_dst});
    };
    const bool few_channels = d.in_channels / d.groups < 16;
    if (hint_usable && few_channels) add_hint();
    candidates.push_back({"any", any_src, any_dst});
    if (hint_usable && !few_channels) add_hint();
    candidates.push_back({"channels_last", layout_desc(src_shape, d.dtype, Layout::channels_last),
                          layout_desc(dst_shape, d.dtype, Layout::channels_last)});
    candidates.push_back({"plain", layout_desc(src_shape, d.dtype, Layout::plain),
                          layout_desc(dst_shape, d.dtype, Layout::plain)});
    const bool tuning = tuner != nullptr && tuner->active();
    if (tuning) {
      candidates.push_back(
          {"blocked", blocked_activation_desc(g.src, g.dt), blocked_activation_desc(g.dst, g.dt)});
      candidates.push_back(
          {"channels_last+any", layout_desc(src_shape, d.dtype, Layout::channels_last), any_dst});
      candidates.push_back({"blocked+any", blocked_activation_desc(g.src, g.dt), any_dst});
    }

    // Without tuning: the first with direct kernels for all three passes, else the least slow.
    std::optional<Choice<Family>> best;
    std::string best_name, last_error;
    std::vector<std::pair<std::string, Choice<Family>>> built;  // tuning: every fast candidate
    for (const Candidate& cand : candidates) {
      try {
        Choice<Family> c = make_choice(cand.src, cand.dst);
        if (tuning && c.reference_impls == 0) built.emplace_back(cand.name, c);
        if (!best || c.slowness() < best->slowness()) {
          best = std::move(c);
          best_name = cand.name;
        }
        if (best->slowness() == 0 && !tuning) break;
      } catch (const dnnl::error& e) {
        last_error = e.what();  // no kernel for this layout pair: try the next
      }
    }
    if (!best)
      throw_runtime("oneDNN " + what_ + ": cannot create the primitives (" + last_error + ")");

    auto bind = [&](const Choice<Family>& c) {
      return ConvPasses(ctx_, c.fwd, c.bwd_data, c.bwd_weights, g.weights_plain, d.bias,
                        d.bias_grad, what_);
    };
    const Choice<Family>* chosen = &*best;
    if (tuning && !built.empty()) {
      const std::string problem = tuning_problem(Family::kName, g, d, src_hint);
      ConvTimingProblem tp{g.weights_plain, bias_md, std::nullopt, d.training, d.data_grad};
      if (src_hint.shape == src_shape && src_hint.dtype == d.dtype) tp.hint = to_desc(src_hint);
      const size_t i = choose(*tuner, problem, built, bind, tp);
      chosen = &built[i].second;
      best_name = built[i].first;
    }
    const auto& fpd = chosen->fwd;
    passes_ = bind(*chosen);
    const memory::desc src_md = fpd.src_desc();
    const memory::desc dst_md = fpd.dst_desc();
    const auto own_grad =
        own_weight_grad(ctx_, d, chosen->bwd_weights, g.weights_plain, src_md, dst_md);
    if (own_grad) passes_.use_weight_grad(own_grad);
    src_fmt_ = to_mem_format(src_md, d.dtype);
    dst_fmt_ = to_mem_format(dst_md, d.dtype);
    implementation_ = std::string(fpd.impl_info_str()) + " / " + chosen->bwd_data.impl_info_str() +
                      " / " + (own_grad ? own_grad->name() : chosen->bwd_weights.impl_info_str());
    what_ += " [src " + format_name(src_md) + " dst " + format_name(dst_md) + "; " +
             implementation_ + (tuning ? "; tuned: " + best_name : "") + "]";
  }

  MemFormat src_format() const override { return src_fmt_; }
  MemFormat dst_format() const override { return dst_fmt_; }
  size_t scratch_bytes() const override { return passes_.scratch_bytes(); }
  std::string implementation() const override { return implementation_; }

  void forward(const void* src, const void* weights, const void* bias, void* dst,
               void* scratch) override {
    passes_.forward(src, weights, bias, dst, scratch);
  }
  void backward_data(const void* diff_dst, const void* weights, void* diff_src,
                     void* scratch) override {
    passes_.backward_data(diff_dst, weights, diff_src, scratch);
  }
  void backward_weights(const void* src, const void* diff_dst, void* diff_weights, void* diff_bias,
                        void* scratch) override {
    passes_.backward_weights(src, diff_dst, diff_weights, diff_bias, scratch);
  }

 private:
  struct Candidate {
    std::string name;
    memory::desc src, dst;
  };

  // The index in `built` of the candidate to use: the one chosen before (the resumed run's
  // record, the machine cache) when it is still among them, else the fastest measured.
  template <typename Bind>
  size_t choose(LayoutTuner& tuner, const std::string& problem,
                const std::vector<std::pair<std::string, Choice<Family>>>& built, Bind&& bind,
                const ConvTimingProblem& tp) {
    if (const auto known = tuner.known(problem)) {
      for (size_t i = 0; i < built.size(); ++i)
        if (built[i].first == *known) {
          if (tuner.verbose()) tuner.note("autotune: " + what_ + ": " + *known + " (known)");
          tuner.remember(problem, *known, false);
          return i;
        }
    }
    if (!tuner.measures()) return 0;  // a resumed untuned problem: the fixed rule's choice
    // Two names for the same layouts (the hint is channels_last, say): time the first only.
    std::vector<size_t> timed;
    std::vector<std::pair<memory::desc, memory::desc>> seen;
    for (size_t i = 0; i < built.size(); ++i) {
      const auto& fpd = built[i].second.fwd;
      const std::pair<memory::desc, memory::desc> layouts{fpd.src_desc(), fpd.dst_desc()};
      if (std::find(seen.begin(), seen.end(), layouts) != seen.end()) continue;
      seen.push_back(layouts);
      timed.push_back(i);
    }
    // Rounds over all candidates, the best of each kept: a burst of other work on the machine
    // then slows one round of every candidate rather than all the timings of one.
    std::vector<ConvPasses> passes;
    passes.reserve(timed.size());
    for (size_t i : timed) passes.push_back(bind(built[i].second));
    std::vector<double> best_s(timed.size(), 0.0);
    for (int round = 0; round < kTimingRounds; ++round)
      for (size_t k = 0; k < timed.size(); ++k) {
        const double s =
            time_conv_candidate(tuner.timer(), ctx_, built[timed[k]].first, passes[k], tp);
        if (round == 0 || s < best_s[k]) best_s[k] = s;
      }
    size_t fastest = timed[0];
    double fastest_s = best_s[0];
    std::string line = "autotune: " + what_ + ":";
    for (size_t k = 0; k < timed.size(); ++k) {
      line += " " + built[timed[k]].first + " (" + format_name(seen[k].first) + "/" +
              format_name(seen[k].second) + ") " + std::to_string(best_s[k] * 1e3) + " ms;";
      if (best_s[k] < fastest_s) {
        fastest = timed[k];
        fastest_s = best_s[k];
      }
    }
    tuner.note(line + " -> " + built[fastest].first);
    tuner.remember(problem, built[fastest].first, true);
    return fastest;
  }

  ContextPtr ctx_;
  std::string what_;
  std::string implementation_;  // forward / backward data / backward weights
  MemFormat src_fmt_, dst_fmt_;
  ConvPasses passes_;
};

}  // namespace

namespace {

std::unique_ptr<ConvKernel> make_direct_conv(ContextPtr ctx, const ConvDesc& d,
                                             const MemFormat& src_hint, LayoutTuner* tuner) {
  if (d.transposed)
    return std::make_unique<OneDnnConv<Deconvolution>>(std::move(ctx), d, src_hint, tuner);
  return std::make_unique<OneDnnConv<Convolution>>(std::move(ctx), d, src_hint, tuner);
}

// A timer that keeps each candidate's best time per pass, so the tuner's line can say where
// the time goes (forward, backward data, backward weights, reorders).
class PassTimes final : public LayoutTimer {
 public:
  explicit PassTimes(LayoutTimer& timer) : timer_(timer) {}
  double seconds(const std::string& candidate, const std::string& pass,
                 const std::function<void()>& call) override {
    const double s = timer_.seconds(candidate, pass, call);
    auto [it, fresh] = best_.try_emplace({candidate, pass}, s);
    if (!fresh) it->second = std::min(it->second, s);
    return s;
  }
  // "12.300 ms (forward 3.100, backward weights 5.000, ...)".
  std::string describe(const std::string& candidate, double total_s) const {
    std::string text = milliseconds(total_s) + " ms (";
    bool first = true;
    for (const auto& [key, s] : best_)
      if (key.first == candidate) {
        text += (first ? "" : ", ") + key.second + " " + milliseconds(s);
        first = false;
      }
    return text + ")";
  }

 private:
  static std::string milliseconds(double s) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f", s * 1e3);
    return buf;
  }
  LayoutTimer& timer_;
  std::map<std::pair<std::string, std::string>, double> best_;
};

// Under the tuner, a convolution Winograd serves runs by whichever of Winograd and oneDNN's
// direct kernel (its layouts tuned as usual) measured faster, the passes and the producer's
// reorder included; the choice is cached like a layout ("winograd" or "direct"). Without a
// measurement (a resumed untuned problem) the fixed rule, winograd_applies, decides.
std::unique_ptr<ConvKernel> tuned_winograd_or_direct(const ContextPtr& ctx, const ConvDesc& d,
                                                     const MemFormat& src_hint,
                                                     LayoutTuner& tuner) {
  const std::string problem =
      "winograd or direct " + tuning_problem("conv", geometry(d), d, src_hint);
  const std::string what = "conv " + geometry(d).text + " (Winograd or direct)";
  std::optional<std::string> choice = tuner.known(problem);
  if (choice && *choice != "winograd" && *choice != "direct") choice.reset();
  if (choice) {
    if (tuner.verbose()) tuner.note("autotune: " + what + ": " + *choice + " (known)");
    tuner.remember(problem, *choice, false);
  } else if (!tuner.measures()) {
    choice = winograd_applies(d) ? "winograd" : "direct";
  }
  if (choice)
    return *choice == "winograd" ? make_winograd_conv(ctx, d)
                                 : make_direct_conv(ctx, d, src_hint, &tuner);
  std::unique_ptr<ConvKernel> kernels[] = {make_winograd_conv(ctx, d),
                                           make_direct_conv(ctx, d, src_hint, &tuner)};
  const char* names[] = {"winograd", "direct"};
  std::optional<MemFormat> hint;
  if (src_hint.dtype == d.dtype && src_hint.shape.numel() > 0 &&
      src_hint.shape == kernels[1]->src_format().shape)
    hint = src_hint;
  PassTimes passes(tuner.timer());
  double best_s[2] = {0, 0};
  for (int round = 0; round < kTimingRounds; ++round)
    for (int k = 0; k < 2; ++k) {
      const double s = time_conv_kernel(passes, ctx, names[k], *kernels[k], d, hint);
      if (round == 0 || s < best_s[k]) best_s[k] = s;
    }
  const int fastest = best_s[0] <= best_s[1] ? 0 : 1;
  tuner.note("autotune: " + what + ": winograd " + passes.describe(names[0], best_s[0]) +
             "; direct " + passes.describe(names[1], best_s[1]) + "; -> " + names[fastest]);
  tuner.remember(problem, names[fastest], true);
  return std::move(kernels[fastest]);
}

}  // namespace

std::unique_ptr<ConvKernel> make_conv(ContextPtr ctx, const ConvDesc& d, const MemFormat& src_hint,
                                      LayoutTuner* tuner) {
  if (dilated_depthwise_applies(d)) return make_dilated_depthwise(d);
  if (tuner != nullptr && tuner->active() && winograd_serves(d) &&
      winograd_setting() == WinogradSetting::automatic)
    return tuned_winograd_or_direct(ctx, d, src_hint, *tuner);
  if (winograd_applies(d)) return make_winograd_conv(ctx, d);
  return make_direct_conv(std::move(ctx), d, src_hint, tuner);
}

}  // namespace crest::onednn
