#include "onednn/reorder.hpp"

#include "onednn/format.hpp"
#include "onednn/primitive.hpp"

namespace crest::onednn {

namespace {

class OneDnnReorder final : public ReorderKernel {
 public:
  OneDnnReorder(ContextPtr ctx, const MemFormat& from, const MemFormat& to) {
    // Between float dtypes a reorder also converts (mixed precision), rounding to nearest even.
    if (from.shape != to.shape ||
        (from.dtype != to.dtype && !(is_floating(from.dtype) && is_floating(to.dtype))))
      throw_usage("reorder between different tensors: " + from.str() + " -> " + to.str());
    const dnnl::memory::desc src = to_desc(from), dst = to_desc(to);
    const std::string what = "reorder " + describe(src) + " -> " + describe(dst);
    auto pd = guarded(what, [&] {
      return dnnl::reorder::primitive_desc(ctx->engine, src, ctx->engine, dst,
                                           user_scratchpad_attr());
    });
    prim_ = BoundPrimitive(ctx, pd, what);
    prim_.bind(DNNL_ARG_FROM, src);
    prim_.bind(DNNL_ARG_TO, dst);
    // The kernel interface has no scratch argument; reorders rarely need any.
    own_scratch_ = Buffer(prim_.scratchpad_bytes());
  }

  void execute(const void* src, void* dst) override {
    prim_.set(DNNL_ARG_FROM, src);
    prim_.set(DNNL_ARG_TO, dst);
    prim_.run(own_scratch_.data());
  }

 private:
  BoundPrimitive prim_;
  Buffer own_scratch_;
};

}  // namespace

std::unique_ptr<ReorderKernel> make_reorder(ContextPtr ctx, const MemFormat& from,
                                            const MemFormat& to) {
  return std::make_unique<OneDnnReorder>(std::move(ctx), from, to);
}

}  // namespace crest::onednn
