// Batch normalisation on oneDNN's batch_normalization primitives, in whatever layout the producer
// delivers (nChw16c from a convolution, plain, channels-last), with separate scale and shift
// (use_scale | use_shift: the parameter store's weight and bias as they are) and ReLU fused with
// fuse_norm_relu. Evaluation uses use_global_stats with the running statistics. In training the
// ReLU's mask (fuse_norm_relu's workspace, one bit per element) is kept from forward to backward,
// whose primitive applies it too: the compile step then skips the ReLU's own backward
// (backward_applies_post_op, compile/fuse_activation_backward.cpp), a pass over the gradient and
// the output that took 4 % of DeepCAM's bf16 step at 192x288.
//
// Data (src, dst and their gradients) is f32, or bf16 / f16 under mixed precision; scale, shift,
// their gradients, the batch's mean and variance and the running statistics are f32 in every case
// (oneDNN's 16-bit batch norm takes f32 statistics and scale/shift, and computes in f32), so a
// 16-bit network needs no conversion around its batch norms and the statistics stay float32.
//
// Synchronised batch norm cannot be a single oneDNN call: oneDNN computes a batch's statistics
// and the backward sums itself, locally. With a reducer the kernel therefore
//   forward:  runs the training primitive for this rank's mean and variance, combines them over
//             the group (the counts and n·mean first, then n·(var + (mean - group mean)^2): the
//             parallel-variance formula, exact without an E[x^2] - mean^2 cancellation), and
//             normalises with the group's statistics through the global-stats primitive;
//   backward: runs the backward primitive with the group's mean and variance, which gives the
//             local sums of dy (diff_shift) and dy·x_hat (diff_scale) and an input gradient that
//             used their local means; sums them over the group and adds the difference, which is
//             per-channel affine in x (a·(x - mean) + b), in the data's own layout
//             (ChannelAffineAccumulate).
// The weight and bias gradients stay local, as PyTorch's SyncBatchNorm returns them.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "crest/backends/batch_norm_kernel.hpp"
#include "onednn/channel_affine_accumulate.hpp"
#include "onednn/format.hpp"
#include "onednn/onednn_backend.hpp"
#include "onednn/primitive.hpp"

namespace crest::onednn {

using dnnl::memory;
using flags = dnnl::normalization_flags;

namespace {

// Where the statistics a training forward used live in the layer's workspace.
struct SavedStats {
  float* mean;
  float* var;
  double* count;    // elements per channel over the group
  void* relu_mask;  // fuse_norm_relu's workspace (null without a fused ReLU)
};

class OneDnnBatchNorm final : public BatchNormKernel {
 public:
  OneDnnBatchNorm(const ContextPtr& ctx, const BatchNormDesc& d) : d_(d), c_(d.channels) {
    if (d.dtype != DType::f32 && !is_half(d.dtype))
      throw_usage("the onednn batch_norm kernel computes in f32, bf16 or f16, got " +
                  dtype_name(d.dtype));
    if (d.post_op.kind != EltwiseKind::none && !batch_norm_fuses(d.post_op))
      throw_usage("the onednn batch_norm kernel fuses only relu with slope 0");
    std::vector<int64_t> dims{d.n, d.channels};
    for (int i = 0; i < d.spatial_rank; ++i) dims.push_back(d.size[static_cast<size_t>(i)]);
    const Shape shape(dims);
    // Batch norm runs on any layout: keep the producer's, so no reorder is inserted, unless the
    // synchronised correction could not run on it (none that oneDNN produces today).
    const bool hint_fits = d.src_hint.shape == shape && d.src_hint.dtype == d.dtype &&
                           ChannelAffineAccumulate::supports(to_desc(d.src_hint));
    data_md_ = hint_fits ? to_desc(d.src_hint) : layout_desc(shape, d.dtype, Layout::plain);
    format_ = to_mem_format(data_md_, d.dtype);
    stat_md_ = memory::desc({d.channels}, memory::data_type::f32, memory::format_tag::a);
    elements_ = static_cast<double>(shape.numel()) / static_cast<double>(d.channels);
    what_ = "batch_norm " + describe(data_md_);
    guarded(what_, [&] { create_primitives(ctx); });
  }

  MemFormat format() const override { return format_; }
  size_t workspace_bytes() const override { return workspace_layout().used(); }
  size_t scratch_bytes() const override { return scratch_layout().used(); }
  bool backward_applies_post_op() const override { return relu_workspace_bytes_ > 0; }

  void forward_training(const void* src, const BatchNormParams& p, void* dst, void* workspace,
                        void* scratch, BatchStatReducer* reducer) override {
    const SavedStats s = saved(workspace);
    const Scratch sc = carve(scratch);
    run_training(src, p, dst, s, sc);
    *s.count = elements_;
    if (reducer) {
      group_statistics(s, reducer);
      // The group's statistics decide the output, and so the ReLU's mask.
      if (relu_workspace_bytes_ > 0)
        run_with_group_statistics(src, p, s, dst, sc);
      else
        run_inference(src, p, s.mean, s.var, dst, sc.shared);
    }
    update_running_statistics(s, p);
  }

  void forward_inference(const void* src, const BatchNormParams& p, void* dst,
                         void* scratch) override {
    run_inference(src, p, p.running_mean, p.running_var, dst, carve(scratch).shared);
  }

  void backward(const void* src, const void* diff_dst, const BatchNormParams& p,
                const void* workspace, void* diff_src, void* diff_weight, void* diff_bias,
                void* scratch, BatchStatReducer* reducer) override {
    const SavedStats s = saved(const_cast<void*>(workspace));
    const Scratch sc = carve(scratch);
    CREST_CHECK(diff_src != nullptr || !d_.input_grad, what_ + ": diff_src expected");
    void* dx = diff_src ? diff_src : sc.unwanted_diff_src;
    bwd_.set(DNNL_ARG_SRC, src);
    bwd_.set(DNNL_ARG_MEAN, s.mean);
    bwd_.set(DNNL_ARG_VARIANCE, s.var);
    bwd_.set(DNNL_ARG_DIFF_DST, diff_dst);
    bwd_.set(DNNL_ARG_SCALE, p.weight);
    bwd_.set(DNNL_ARG_DIFF_SRC, dx);
    bwd_.set(DNNL_ARG_DIFF_SCALE, diff_weight);
    bwd_.set(DNNL_ARG_DIFF_SHIFT, diff_bias);
    if (relu_workspace_bytes_ > 0) bwd_.set(DNNL_ARG_WORKSPACE, s.relu_mask);
    bwd_.run(sc.shared);
    if (reducer) correct_to_group_gradient(src, p, s, diff_weight, diff_bias, dx, reducer);
  }

 private:
  struct Scratch {
    void* unwanted_diff_src;  // backward's input gradient when nobody wants it
    void* shared;             // the primitives' scratchpads (they run in turn)
  };

  void create_primitives(const ContextPtr& ctx) {
    const flags affine = flags::use_scale | flags::use_shift;
    const flags relu = d_.post_op.kind == EltwiseKind::none ? flags::none : flags::fuse_norm_relu;
    const auto attr = user_scratchpad_attr();
    using Fwd = dnnl::batch_normalization_forward;
    const float eps = static_cast<float>(d_.eps);
    const auto& eng = ctx->engine;
    using prop = dnnl::prop_kind;
    Fwd::primitive_desc ipd(eng, prop::forward_inference, data_md_, data_md_, eps,
                            affine | relu | flags::use_global_stats, attr);
    infer_ = bind_forward(ctx, ipd, "inference");
    if (!d_.training) return;
    Fwd::primitive_desc tpd(eng, prop::forward_training, data_md_, data_md_, eps, affine | relu,
                            attr);
    train_ = bind_forward(ctx, tpd, "training");
    relu_workspace_bytes_ = tpd.workspace_desc().get_size();
    if (relu_workspace_bytes_ > 0) {
      train_.bind(DNNL_ARG_WORKSPACE, tpd.workspace_desc());
      // Synchronised: normalised again with the group's statistics, the mask written anew.
      Fwd::primitive_desc gpd(eng, prop::forward_training, data_md_, data_md_, eps,
                              affine | relu | flags::use_global_stats, attr);
      train_group_ = bind_forward(ctx, gpd, "training with the group's statistics");
      train_group_.bind(DNNL_ARG_WORKSPACE, gpd.workspace_desc());
    }
    // The backward applies the ReLU's mask (from the workspace) before its own gradient.
    Fwd::primitive_desc hint(eng, prop::forward_training, data_md_, data_md_, eps, affine | relu,
                             attr);
    dnnl::batch_normalization_backward::primitive_desc bpd(
        eng, prop::backward, data_md_, data_md_, data_md_, eps, affine | relu, hint, attr);
    bwd_ = BoundPrimitive(ctx, bpd, what_ + " backward [" + bpd.impl_info_str() + "]");
    for (int arg : {DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_SRC}) bwd_.bind(arg, data_md_);
    for (int arg : {DNNL_ARG_MEAN, DNNL_ARG_VARIANCE, DNNL_ARG_SCALE, DNNL_ARG_DIFF_SCALE,
                    DNNL_ARG_DIFF_SHIFT})
      bwd_.bind(arg, stat_md_);
    if (relu_workspace_bytes_ > 0) bwd_.bind(DNNL_ARG_WORKSPACE, bpd.workspace_desc());
    create_group_correction();
  }

  BoundPrimitive bind_forward(const ContextPtr& ctx,
                              const dnnl::batch_normalization_forward::primitive_desc& pd,
                              const std::string& mode) {
    BoundPrimitive b(ctx, pd, what_ + " " + mode + " [" + pd.impl_info_str() + "]");
    b.bind(DNNL_ARG_SRC, data_md_);
    b.bind(DNNL_ARG_DST, data_md_);
    // MEAN and VARIANCE are outputs in training, inputs with global statistics.
    for (int arg : {DNNL_ARG_MEAN, DNNL_ARG_VARIANCE, DNNL_ARG_SCALE, DNNL_ARG_SHIFT})
      b.bind(arg, stat_md_);
    return b;
  }

  void create_group_correction() {
    correct_ = ChannelAffineAccumulate(data_md_);
    coef_.assign(2 * static_cast<size_t>(c_), 0.f);
    sums_.assign(2 * static_cast<size_t>(c_) + 1, 0.0);
    group_mean_.assign(static_cast<size_t>(c_), 0.0);
  }

  // One forward primitive (training, training with the group's statistics, inference) over
  // these tensors; `mask` is the fused ReLU's workspace (null: none bound).
  static void run_forward(BoundPrimitive& prim, const void* src, const BatchNormParams& p,
                          const void* mean, const void* var, void* dst, void* mask, void* shared) {
    prim.set(DNNL_ARG_SRC, src);
    prim.set(DNNL_ARG_DST, dst);
    prim.set(DNNL_ARG_MEAN, mean);
    prim.set(DNNL_ARG_VARIANCE, var);
    prim.set(DNNL_ARG_SCALE, p.weight);
    prim.set(DNNL_ARG_SHIFT, p.bias);
    if (mask) prim.set(DNNL_ARG_WORKSPACE, mask);
    prim.run(shared);
  }

  // Normalises with the batch's own statistics, writing them (and the ReLU's mask) to `s`.
  void run_training(const void* src, const BatchNormParams& p, void* dst, const SavedStats& s,
                    const Scratch& sc) {
    run_forward(train_, src, p, s.mean, s.var, dst, s.relu_mask, sc.shared);
  }

  // Normalises with the group's statistics in `s`, writing the ReLU's mask anew.
  void run_with_group_statistics(const void* src, const BatchNormParams& p, const SavedStats& s,
                                 void* dst, const Scratch& sc) {
    run_forward(train_group_, src, p, s.mean, s.var, dst, s.relu_mask, sc.shared);
  }

  void run_inference(const void* src, const BatchNormParams& p, const void* mean, const void* var,
                     void* dst, void* shared) {
    run_forward(infer_, src, p, mean, var, dst, nullptr, shared);
  }

  // This rank's mean and biased variance in `s` become the group's.
  void group_statistics(const SavedStats& s, BatchStatReducer* reducer) {
    const auto C = static_cast<size_t>(c_);
    const double n = elements_;
    for (size_t c = 0; c < C; ++c) sums_[c] = n * static_cast<double>(s.mean[c]);
    sums_[C] = n;
    reducer->allreduce_sum(sums_.data(), C + 1);
    const double group_n = sums_[C];
    std::vector<double>& group_mean = group_mean_;
    for (size_t c = 0; c < C; ++c) group_mean[c] = sums_[c] / group_n;
    for (size_t c = 0; c < C; ++c) {
      const double dev = static_cast<double>(s.mean[c]) - group_mean[c];
      sums_[c] = n * (static_cast<double>(s.var[c]) + dev * dev);
    }
    reducer->allreduce_sum(sums_.data(), C);
    for (size_t c = 0; c < C; ++c) {
      s.mean[c] = static_cast<float>(group_mean[c]);
      s.var[c] = static_cast<float>(sums_[c] / group_n);
    }
    *s.count = group_n;
  }

  void correct_to_group_gradient(const void* src, const BatchNormParams& p, const SavedStats& s,
                                 const void* diff_weight, const void* diff_bias, void* diff_src,
                                 BatchStatReducer* reducer) {
    const auto C = static_cast<size_t>(c_);
    const auto* local_dy_xhat = static_cast<const float*>(diff_weight);
    const auto* local_dy = static_cast<const float*>(diff_bias);
    for (size_t c = 0; c < C; ++c) {
      sums_[c] = local_dy[c];
      sums_[C + c] = local_dy_xhat[c];
    }
    reducer->allreduce_sum(sums_.data(), 2 * C);
    // oneDNN used dy - sum_local(dy)/n - x_hat sum_local(dy x_hat)/n; the group's gradient uses
    // the group's sums over the group's count. The difference is a·(x - mean) + b per channel.
    const double n = elements_, group_n = *s.count;
    float* a = coef_.data();
    float* b = a + C;
    const auto* weight = static_cast<const float*>(p.weight);
    for (size_t c = 0; c < C; ++c) {
      const double inv_std = 1.0 / std::sqrt(static_cast<double>(s.var[c]) + d_.eps);
      const double k = static_cast<double>(weight[c]) * inv_std;
      const double d_dy = local_dy[c] / n - sums_[c] / group_n;
      const double d_dy_xhat = local_dy_xhat[c] / n - sums_[C + c] / group_n;
      a[c] = static_cast<float>(k * inv_std * d_dy_xhat);  // per unit of (x - mean)
      b[c] = static_cast<float>(k * d_dy);
    }
    correct_.run(src, {s.mean, a, b}, diff_src);
  }

  // PyTorch's update: the unbiased variance n / (n - 1) with the group's n.
  void update_running_statistics(const SavedStats& s, const BatchNormParams& p) const {
    const double n = *s.count;
    if (n < 2)
      throw_input(
          "batch_norm in training needs more than one value per channel (batch x spatial "
          "= 1), as PyTorch's BatchNorm does");
    const float m = static_cast<float>(d_.momentum);
    const float unbiased = static_cast<float>(n / (n - 1));
    auto* running_mean = static_cast<float*>(p.running_mean);
    auto* running_var = static_cast<float*>(p.running_var);
    for (int64_t c = 0; c < c_; ++c) {
      running_mean[c] = (1.f - m) * running_mean[c] + m * s.mean[c];
      running_var[c] = (1.f - m) * running_var[c] + m * (s.var[c] * unbiased);
    }
    static_cast<float*>(p.num_batches_tracked)[0] += 1.f;
  }

  // Workspace: mean [C] f32, variance [C] f32, the count (double), the ReLU's mask; with a null
  // base only the size is meaningful.
  ScratchCarver workspace_layout(void* base = nullptr, SavedStats* s = nullptr) const {
    ScratchCarver w(base);
    void* mean = w.take(static_cast<size_t>(c_) * sizeof(float));
    void* var = w.take(static_cast<size_t>(c_) * sizeof(float));
    void* count = w.take(sizeof(double));
    void* mask = w.take(relu_workspace_bytes_);
    if (s)
      *s = {static_cast<float*>(mean), static_cast<float*>(var), static_cast<double*>(count),
            relu_workspace_bytes_ > 0 ? mask : nullptr};
    return w;
  }

  SavedStats saved(void* workspace) const {
    SavedStats s{};
    workspace_layout(workspace, &s);
    return s;
  }

  ScratchCarver scratch_layout(void* base = nullptr, Scratch* s = nullptr) const {
    ScratchCarver c(base);
    void* unwanted = c.take(d_.training && !d_.input_grad ? data_md_.get_size() : 0);
    void* shared = c.take(std::max({infer_.scratchpad_bytes(), train_.scratchpad_bytes(),
                                    train_group_.scratchpad_bytes(), bwd_.scratchpad_bytes()}));
    if (s) *s = {unwanted, shared};
    return c;
  }

  Scratch carve(void* scratch) const {
    Scratch s{};
    scratch_layout(scratch, &s);
    return s;
  }

  BatchNormDesc d_;
  int64_t c_;
  memory::desc data_md_, stat_md_;
  MemFormat format_;
  double elements_ = 0;  // per channel on this rank: n x spatial
  std::string what_;
  BoundPrimitive infer_, train_, train_group_, bwd_;
  ChannelAffineAccumulate correct_;
  size_t relu_workspace_bytes_ = 0;        // the fused ReLU's mask in training, 0 without one
  std::vector<float> coef_;                // a [C] and b [C] of the group correction
  std::vector<double> sums_, group_mean_;  // per-channel sums handed to the reducer
};

std::unique_ptr<BatchNormKernel> make_batch_norm(Backend& backend, const BatchNormDesc& d) {
  return std::make_unique<OneDnnBatchNorm>(backend_context(backend), d);
}

}  // namespace

CREST_REGISTER_KERNEL(onednn_batch_norm, "onednn", BatchNormKernel, make_batch_norm);

}  // namespace crest::onednn
