#include "onednn/pool.hpp"

#include <algorithm>
#include <string>

#include "onednn/format.hpp"
#include "onednn/primitive.hpp"

namespace crest::onednn {

using dnnl::memory;

namespace {

dnnl::algorithm pool_algorithm(PoolKind k) {
  switch (k) {
    case PoolKind::max:
      return dnnl::algorithm::pooling_max;
    case PoolKind::avg_include_pad:
      return dnnl::algorithm::pooling_avg_include_padding;
    case PoolKind::avg_exclude_pad:
      return dnnl::algorithm::pooling_avg_exclude_padding;
  }
  throw_usage("unknown pooling kind");
}

class OneDnnPool final : public PoolKernel {
 public:
  OneDnnPool(ContextPtr ctx, const PoolDesc& d, const MemFormat& src_hint) {
    if (d.spatial_rank < 1 || d.spatial_rank > 3)
      throw_usage("pooling spatial rank must be 1, 2 or 3, got " + std::to_string(d.spatial_rank));
    const auto dt = to_dnnl(d.dtype);
    memory::dims src{d.n, d.channels}, dst{d.n, d.channels}, kernel, strides, pad_l, pad_r;
    for (size_t i = 0; i < static_cast<size_t>(d.spatial_rank); ++i) {
      src.push_back(d.in_size[i]);
      dst.push_back(d.out_size[i]);
      kernel.push_back(d.kernel[i]);
      strides.push_back(d.stride[i]);
      pad_l.push_back(d.pad_lo[i]);
      pad_r.push_back(d.pad_hi[i]);
    }
    const Shape src_shape = to_shape(src);
    // Pooling runs well on any layout (blocked included), so take what the producer delivers;
    // a hint that does not describe this input (none given) means plain.
    const bool hint_fits = src_hint.shape == src_shape && src_hint.dtype == d.dtype;
    const memory::desc src_md =
        hint_fits ? to_desc(src_hint) : layout_desc(src_shape, d.dtype, Layout::plain);
    const memory::desc any_dst(dst, dt, memory::format_tag::any);
    const memory::dims no_dilation(kernel.size(), 0);
    what_ = "pooling " + describe(src_md) + " -> " + to_shape(dst).str();
    const auto alg = pool_algorithm(d.kind);

    auto fpd = guarded(what_ + " forward", [&] {
      return dnnl::pooling_forward::primitive_desc(
          ctx->engine, dnnl::prop_kind::forward_training, alg, src_md, any_dst, strides, kernel,
          no_dilation, pad_l, pad_r, user_scratchpad_attr());
    });
    const memory::desc dst_md = fpd.dst_desc();
    src_fmt_ = to_mem_format(src_md, d.dtype);
    dst_fmt_ = to_mem_format(dst_md, d.dtype);
    const memory::desc ws_md = fpd.workspace_desc();
    workspace_ = ws_md.get_size();

    fwd_ = BoundPrimitive(ctx, fpd, what_ + " forward");
    fwd_.bind(DNNL_ARG_SRC, src_md);
    fwd_.bind(DNNL_ARG_DST, dst_md);
    if (workspace_ > 0) fwd_.bind(DNNL_ARG_WORKSPACE, ws_md);

    auto bpd = guarded(what_ + " backward", [&] {
      return dnnl::pooling_backward::primitive_desc(ctx->engine, alg, src_md, dst_md, strides,
                                                    kernel, no_dilation, pad_l, pad_r, fpd,
                                                    user_scratchpad_attr());
    });
    bwd_ = BoundPrimitive(ctx, bpd, what_ + " backward");
    bwd_.bind(DNNL_ARG_DIFF_DST, dst_md);
    bwd_.bind(DNNL_ARG_DIFF_SRC, src_md);
    if (workspace_ > 0) bwd_.bind(DNNL_ARG_WORKSPACE, ws_md);
  }

  MemFormat src_format() const override { return src_fmt_; }
  MemFormat dst_format() const override { return dst_fmt_; }
  size_t workspace_bytes() const override { return workspace_; }
  size_t scratch_bytes() const override {
    return std::max(fwd_.scratchpad_bytes(), bwd_.scratchpad_bytes());
  }

  void forward(const void* src, void* dst, void* workspace, void* scratch) override {
    fwd_.set(DNNL_ARG_SRC, src);
    fwd_.set(DNNL_ARG_DST, dst);
    if (workspace_ > 0) fwd_.set(DNNL_ARG_WORKSPACE, workspace);
    fwd_.run(scratch);
  }

  void backward(const void* diff_dst, const void* workspace, void* diff_src,
                void* scratch) override {
    bwd_.set(DNNL_ARG_DIFF_DST, diff_dst);
    bwd_.set(DNNL_ARG_DIFF_SRC, diff_src);
    if (workspace_ > 0) bwd_.set(DNNL_ARG_WORKSPACE, workspace);
    bwd_.run(scratch);
  }

 private:
  std::string what_;
  MemFormat src_fmt_, dst_fmt_;
  BoundPrimitive fwd_, bwd_;
  size_t workspace_ = 0;
};

}  // namespace

std::unique_ptr<PoolKernel> make_pool(ContextPtr ctx, const PoolDesc& d,
                                      const MemFormat& src_hint) {
  return std::make_unique<OneDnnPool>(std::move(ctx), d, src_hint);
}

}  // namespace crest::onednn
