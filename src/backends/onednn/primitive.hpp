// A oneDNN primitive bound once to its argument memory objects, so that executing it is only
// "point the arguments at this call's buffers, run": no descriptor work, no allocation.
#pragma once
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include "crest/core/error.hpp"
#include "onednn/context.hpp"
#include "onednn/weight_repack.hpp"

namespace crest::onednn {

// Primitive attributes every crest primitive uses: the scratchpad is passed in by the caller
// (carved from the executor's scratch region) instead of being allocated by oneDNN.
dnnl::primitive_attr user_scratchpad_attr();

// Runs `f`, turning oneDNN's exceptions into crest::Error naming `what` (primitive and shapes).
template <typename F>
decltype(auto) guarded(const std::string& what, F&& f) {
  try {
    return std::forward<F>(f)();
  } catch (const dnnl::error& e) {
    throw_runtime("oneDNN " + what + ": " + e.what() + " (status " +
                  std::to_string(static_cast<int>(e.status)) + ")");
  }
}

class BoundPrimitive {
 public:
  BoundPrimitive() = default;
  // `pd` must have been created with user_scratchpad_attr(). `what` names it in errors.
  BoundPrimitive(ContextPtr ctx, const dnnl::primitive_desc_base& pd, std::string what);

  // Registers argument `id` (DNNL_ARG_*) with layout `d`; its buffer is set per call.
  void bind(int id, const dnnl::memory::desc& d);
  // Points argument `id` at `p` for the next run(). For blocked descriptors with padding oneDNN
  // rewrites the (already zero) padding here, hence the const_cast for inputs.
  void set(int id, const void* p);
  void run(void* scratchpad);

  bool valid() const { return static_cast<bool>(prim_); }
  size_t scratchpad_bytes() const { return scratchpad_bytes_; }
  const std::string& what() const { return what_; }

 private:
  ContextPtr ctx_;
  dnnl::primitive prim_;
  std::unordered_map<int, dnnl::memory> args_;
  size_t scratchpad_bytes_ = 0;
  std::string what_;
};

// A matmul c = a x b bound to its three layouts (SRC a, WEIGHTS b, DST c). With `accumulate`
// it adds the product into c (a sum post-op), for sums over chunks whose first chunk overwrites.
BoundPrimitive bound_matmul(const ContextPtr& ctx, const dnnl::memory::desc& a,
                            const dnnl::memory::desc& b, const dnnl::memory::desc& c,
                            bool accumulate, const std::string& what);

// Copies between a fixed plain layout and the layout a primitive wants (weights, bias). It is
// a no-op (and needs no buffer) when the two are the same.
class LayoutBridge {
 public:
  LayoutBridge() = default;
  LayoutBridge(ContextPtr ctx, const dnnl::memory::desc& from, const dnnl::memory::desc& to,
               const std::string& what);

  bool needed() const { return repack_.has_value() || reorder_.valid(); }
  // Bytes of the primitive-side copy, which the caller keeps in scratch (0 when not needed).
  size_t buffer_bytes() const { return buffer_bytes_; }
  // Bytes of the reorder's own scratchpad.
  size_t scratch_bytes() const;
  // Converts `src` into `dst`, using `scratch` for the reorder.
  void run(const void* src, void* dst, void* scratch);

 private:
  std::optional<WeightRepack> repack_;  // crest's loops where they cover the layouts, else
  BoundPrimitive reorder_;              // oneDNN's reorder
  size_t buffer_bytes_ = 0;
};

// Carves consecutive aligned pieces out of one scratch region; also used (with a null base) to
// compute the total size.
class ScratchCarver {
 public:
  explicit ScratchCarver(void* base = nullptr) : base_(static_cast<char*>(base)) {}
  void* take(size_t bytes);
  size_t used() const { return used_; }

 private:
  char* base_;
  size_t used_ = 0;
};

// One call's scratch for a primitive whose parameters go through a LayoutBridge: the parameters
// in the primitive's layout, `extra` bytes (e.g. a bias gradient nobody wants), and one region
// shared by the primitive's and the reorder's scratchpads (they run in turn). With a null base
// only `used` is meaningful: the size to ask the executor for.
struct CallScratch {
  void* converted = nullptr;
  void* extra = nullptr;
  void* shared = nullptr;
  size_t used = 0;
};
CallScratch carve_call_scratch(void* base, const LayoutBridge& bridge, const BoundPrimitive& prim,
                               size_t extra);

// The weights a primitive reads: converted by `bridge` into the call's scratch (`p`, carved for
// that bridge) when the layouts differ, else `weights` as they are.
const void* bridged_weights(LayoutBridge& bridge, const void* weights, const CallScratch& p);

}  // namespace crest::onednn
