// Forward is dnnl::concat; backward reads each input's channel range out of the output gradient
// with a reorder from a sub-memory descriptor, so no scratch is needed. Blocked layouts allow a
// sub-memory only at channel offsets that are multiples of the block, so when the layout oneDNN
// picks for the output does not, the output is made plain instead.
#include "onednn/concat.hpp"

#include <algorithm>
#include <optional>
#include <string>

#include "onednn/format.hpp"
#include "onednn/primitive.hpp"

namespace crest::onednn {

using dnnl::memory;

namespace {

// Offsets of a channel range starting at `channel` in a tensor of rank `rank` (>= 2).
memory::dims channel_offset(size_t rank, int64_t channel) {
  memory::dims offsets(rank, 0);
  if (rank > 1) offsets[1] = channel;
  return offsets;
}

class OneDnnConcat final : public ConcatKernel {
 public:
  OneDnnConcat(ContextPtr ctx, const std::vector<MemFormat>& srcs) {
    if (srcs.empty()) throw_usage("concat needs at least one input");
    const DType dtype = srcs[0].dtype;
    std::vector<memory::desc> src_mds;
    Shape out = srcs[0].shape;
    out[1] = 0;
    what_ = "concat";
    for (const MemFormat& f : srcs) {
      if (f.dtype != dtype || f.shape.rank() != out.rank() || f.shape.rank() < 2)
        throw_usage("concat inputs differ in dtype or rank: " + f.str() + " vs " + srcs[0].str());
      for (int i = 0; i < f.shape.rank(); ++i)
        if (i != 1 && f.shape[i] != out[i])
          throw_usage("concat inputs differ outside the channel axis: " + f.str() + " vs " +
                      srcs[0].str());
      src_mds.push_back(to_desc(f));
      what_ += ' ';
      what_ += describe(src_mds.back());
      out[1] += f.shape[1];
    }

    // Output layout, in order of preference: the inputs' own layout (so the next convolution
    // needs no reorder), oneDNN's choice, plain. Each must let every input's channel range be
    // addressed as a sub-memory, which backward needs.
    auto make_pd = [&](const memory::desc* dst) {
      return dst ? dnnl::concat::primitive_desc(ctx->engine, *dst, 1, src_mds,
                                                user_scratchpad_attr())
                 : dnnl::concat::primitive_desc(ctx->engine, 1, src_mds, user_scratchpad_attr());
    };
    std::optional<dnnl::concat::primitive_desc> chosen;
    const memory::desc like_inputs = same_layout(src_mds[0], to_dims(out));
    bool inputs_alike = !like_inputs.is_zero();
    for (size_t i = 0; i < src_mds.size(); ++i)
      inputs_alike = inputs_alike && same_layout(src_mds[0], to_dims(srcs[i].shape)) == src_mds[i];
    const memory::desc plain = layout_desc(out, dtype, Layout::plain);
    const memory::desc* preferences[] = {inputs_alike ? &like_inputs : nullptr, nullptr, &plain};
    std::string last_error = "no layout lets backward address every input's channels";
    for (size_t k = inputs_alike ? 0 : 1; k < 3 && !chosen; ++k) {
      try {
        auto pd = make_pd(preferences[k]);
        if (slices_exist(pd.dst_desc(), srcs)) chosen = pd;
      } catch (const dnnl::error& e) {
        last_error = e.what();
      }
    }
    if (!chosen) throw_runtime("oneDNN " + what_ + ": " + last_error);
    const dnnl::concat::primitive_desc& pd = *chosen;
    const memory::desc dst_md = pd.dst_desc();
    dst_fmt_ = to_mem_format(dst_md, dtype);

    fwd_ = BoundPrimitive(ctx, pd, what_);
    for (size_t i = 0; i < src_mds.size(); ++i)
      fwd_.bind(DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i), src_mds[i]);
    fwd_.bind(DNNL_ARG_DST, dst_md);

    int64_t offset = 0;
    size_t scratch = fwd_.scratchpad_bytes();
    for (size_t i = 0; i < srcs.size(); ++i) {
      const memory::dims dims = to_dims(srcs[i].shape);
      const memory::dims offsets = channel_offset(dims.size(), offset);
      offset += srcs[i].shape[1];
      const memory::desc slice = dst_md.submemory_desc(dims, offsets);
      const std::string name = what_ + " backward, input " + std::to_string(i);
      auto rpd = guarded(name, [&] {
        return dnnl::reorder::primitive_desc(ctx->engine, slice, ctx->engine, src_mds[i],
                                             user_scratchpad_attr());
      });
      split_.emplace_back(ctx, rpd, name);
      // The slice descriptor carries its offset, so the handle is the whole gradient's base.
      split_.back().bind(DNNL_ARG_FROM, slice);
      split_.back().bind(DNNL_ARG_TO, src_mds[i]);
      scratch = std::max(scratch, split_.back().scratchpad_bytes());
    }
    // The kernel interface has no scratch argument; concat and reorders rarely need any.
    own_scratch_ = Buffer(scratch);
  }

  MemFormat dst_format() const override { return dst_fmt_; }

  void forward(const std::vector<const void*>& srcs, void* dst) override {
    CREST_CHECK(srcs.size() == split_.size(), what_ + ": wrong number of inputs");
    for (size_t i = 0; i < srcs.size(); ++i)
      fwd_.set(DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i), srcs[i]);
    fwd_.set(DNNL_ARG_DST, dst);
    fwd_.run(own_scratch_.data());
  }

  void backward(const void* diff_dst, const std::vector<void*>& diff_srcs) override {
    CREST_CHECK(diff_srcs.size() == split_.size(), what_ + ": wrong number of gradients");
    for (size_t i = 0; i < diff_srcs.size(); ++i) {
      if (diff_srcs[i] == nullptr) continue;
      split_[i].set(DNNL_ARG_FROM, diff_dst);
      split_[i].set(DNNL_ARG_TO, diff_srcs[i]);
      split_[i].run(own_scratch_.data());
    }
  }

 private:
  // Whether every input's channel range is addressable as a sub-memory of `dst`.
  static bool slices_exist(const memory::desc& dst, const std::vector<MemFormat>& srcs) {
    int64_t offset = 0;
    for (const MemFormat& f : srcs) {
      const memory::dims dims = to_dims(f.shape);
      const memory::dims offsets = channel_offset(dims.size(), offset);
      offset += f.shape[1];
      try {
        dst.submemory_desc(dims, offsets);
      } catch (const dnnl::error&) {
        return false;  // e.g. a channel offset inside a block
      }
    }
    return true;
  }

  std::string what_;
  MemFormat dst_fmt_;
  BoundPrimitive fwd_;
  std::vector<BoundPrimitive> split_;
  Buffer own_scratch_;
};

}  // namespace

std::unique_ptr<ConcatKernel> make_concat(ContextPtr ctx, const std::vector<MemFormat>& srcs) {
  return std::make_unique<OneDnnConcat>(std::move(ctx), srcs);
}

}  // namespace crest::onednn
