#include "onednn/primitive.hpp"

#include <algorithm>

#include "crest/core/tensor.hpp"
#include "onednn/format.hpp"

namespace crest::onednn {

dnnl::primitive_attr user_scratchpad_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

BoundPrimitive bound_matmul(const ContextPtr& ctx, const dnnl::memory::desc& a,
                            const dnnl::memory::desc& b, const dnnl::memory::desc& c,
                            bool accumulate, const std::string& what) {
  dnnl::primitive_attr attr = user_scratchpad_attr();
  if (accumulate) {
    dnnl::post_ops ops;
    ops.append_sum(1.f);
    attr.set_post_ops(ops);
  }
  auto pd = guarded(what, [&] { return dnnl::matmul::primitive_desc(ctx->engine, a, b, c, attr); });
  BoundPrimitive p(ctx, pd, what);
  p.bind(DNNL_ARG_SRC, a);
  p.bind(DNNL_ARG_WEIGHTS, b);
  p.bind(DNNL_ARG_DST, c);
  return p;
}

BoundPrimitive::BoundPrimitive(ContextPtr ctx, const dnnl::primitive_desc_base& pd,
                               std::string what)
    : ctx_(std::move(ctx)), what_(std::move(what)) {
  guarded(what_, [&] {
    prim_ = dnnl::primitive(pd.get());
    const dnnl::memory::desc sp = pd.scratchpad_desc();
    scratchpad_bytes_ = sp.get_size();
    if (scratchpad_bytes_ > 0) bind(DNNL_ARG_SCRATCHPAD, sp);
  });
}

void BoundPrimitive::bind(int id, const dnnl::memory::desc& d) {
  guarded(what_, [&] { args_[id] = dnnl::memory(d, ctx_->engine, DNNL_MEMORY_NONE); });
}

void BoundPrimitive::set(int id, const void* p) {
  auto it = args_.find(id);
  CREST_CHECK(it != args_.end(), what_ + ": argument " + std::to_string(id) + " not bound");
  CREST_CHECK(p != nullptr, what_ + ": null buffer for argument " + std::to_string(id));
  guarded(what_, [&] { it->second.set_data_handle(const_cast<void*>(p)); });
}

void BoundPrimitive::run(void* scratchpad) {
  if (scratchpad_bytes_ > 0) set(DNNL_ARG_SCRATCHPAD, scratchpad);
  guarded(what_, [&] {
    prim_.execute(ctx_->stream, args_);
    ctx_->stream.wait();
  });
}

LayoutBridge::LayoutBridge(ContextPtr ctx, const dnnl::memory::desc& from,
                           const dnnl::memory::desc& to, const std::string& what) {
  if (from == to) return;
  // The converted copy lives in scratch on whichever side is the primitive's: `to` for weights
  // going in, `from` for a weight gradient coming out. The larger covers both.
  buffer_bytes_ = std::max(from.get_size(), to.get_size());
  repack_ = WeightRepack::plan(from, to);
  if (repack_) return;
  const std::string name = "reorder " + describe(from) + " -> " + describe(to) + " (" + what + ")";
  auto pd = guarded(name, [&] {
    return dnnl::reorder::primitive_desc(ctx->engine, from, ctx->engine, to,
                                         user_scratchpad_attr());
  });
  reorder_ = BoundPrimitive(std::move(ctx), pd, name);
  reorder_.bind(DNNL_ARG_FROM, from);
  reorder_.bind(DNNL_ARG_TO, to);
}

size_t LayoutBridge::scratch_bytes() const { return reorder_.scratchpad_bytes(); }

void LayoutBridge::run(const void* src, void* dst, void* scratch) {
  if (repack_) return repack_->run(src, dst);
  reorder_.set(DNNL_ARG_FROM, src);
  reorder_.set(DNNL_ARG_TO, dst);
  reorder_.run(scratch);
}

void* ScratchCarver::take(size_t bytes) {
  if (bytes == 0) return nullptr;
  // 64-byte pieces: a cache line, and what oneDNN's vector loads like.
  const size_t at = align_up(used_, 64);
  used_ = at + bytes;
  return base_ == nullptr ? nullptr : base_ + at;
}

CallScratch carve_call_scratch(void* base, const LayoutBridge& bridge, const BoundPrimitive& prim,
                               size_t extra) {
  ScratchCarver c(base);
  CallScratch s;
  if (bridge.needed()) s.converted = c.take(bridge.buffer_bytes());
  s.extra = c.take(extra);
  s.shared = c.take(std::max(prim.scratchpad_bytes(), bridge.scratch_bytes()));
  s.used = c.used();
  return s;
}

const void* bridged_weights(LayoutBridge& bridge, const void* weights, const CallScratch& p) {
  if (!bridge.needed()) return weights;
  bridge.run(weights, p.converted, p.shared);
  return p.converted;
}

}  // namespace crest::onednn
