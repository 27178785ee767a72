#include "crest/layers/shape_ops.hpp"

#include "crest/core/error.hpp"

namespace crest {

CREST_REGISTER_LAYER(flatten, layer_kind<FlattenLayer>("flatten"));
CREST_REGISTER_LAYER(concat, layer_kind<ConcatLayer>("concat"));
CREST_REGISTER_LAYER(expand_as, layer_kind<ExpandAsLayer>("expand_as"));

LayerSpec layers::flatten() { return {"flatten", {}}; }
LayerSpec layers::concat() { return {"concat", {}}; }
LayerSpec layers::expand_as() { return {"expand_as", {}}; }

// ------------------------------------------------------------------------------------- flatten

std::vector<Shape> FlattenLayer::infer_shapes(const std::vector<Shape>& in) const {
  if (in.size() != 1 || in[0].rank() < 2) throw_input("flatten needs one input of rank >= 2");
  return {Shape{in[0][0], in[0].numel() / std::max<int64_t>(in[0][0], 1)}};
}

BackwardNeeds FlattenLayer::backward_needs(size_t n_in, size_t n_out) const {
  BackwardNeeds n{std::vector<bool>(n_in, false), std::vector<bool>(n_out, false), false};
  n.view = true;
  return n;
}

void FlattenLayer::create(CreateContext& ctx) {
  const Shape& in = ctx.in_shapes[0];
  // Channels-last storage of [N, C, spatial...] is exactly [N, spatial..., C] flattened.
  ctx.in_formats[0] =
      plain_format(in, ctx.dtype, in.rank() > 2 ? Layout::channels_last : Layout::plain);
  ctx.out_formats = {plain_format(ctx.out_shapes[0], ctx.dtype)};
  bytes_ = ctx.out_formats[0].bytes;
}

void FlattenLayer::forward(RunContext& ctx) {
  if (ctx.out[0] != ctx.in[0])
    ctx.vec->copy(ctx.in[0], ctx.out[0], bytes_ / dtype_size(ctx.vec->dtype()));
}

void FlattenLayer::backward(RunContext& ctx) {
  if (ctx.diff_in[0] && ctx.diff_in[0] != ctx.diff_out[0])
    ctx.vec->copy(ctx.diff_out[0], ctx.diff_in[0], bytes_ / dtype_size(ctx.vec->dtype()));
}

// -------------------------------------------------------------------------------------- concat

std::vector<Shape> ConcatLayer::infer_shapes(const std::vector<Shape>& in) const {
  if (in.size() < 2) throw_input("concat needs at least two inputs");
  Shape out = in[0];
  for (size_t i = 1; i < in.size(); ++i) {
    bool ok = in[i].rank() == out.rank();
    for (int d = 0; ok && d < out.rank(); ++d) ok = d == 1 || in[i][d] == out[d];
    if (!ok)
      throw_input("concat inputs must agree in every dimension but channels: " + in[0].str() +
                  " vs " + in[i].str());
    out[1] += in[i][1];
  }
  return {out};
}

namespace {

// Inputs whose layouts the backend cannot concatenate together (a plain one beside a
// channels-last one, say) all in one layout: of plain and channels-last, the one most of their
// bytes already have where the backend takes it (the fewest bytes reordered), else plain.
std::vector<MemFormat> concatenable(Backend& backend, const std::vector<MemFormat>& in) {
  if (backend.supports(in)) return in;
  size_t channels_last_bytes = 0, total = 0;
  for (const MemFormat& f : in) {
    total += f.bytes;
    if (f.layout == Layout::channels_last) channels_last_bytes += f.bytes;
  }
  const auto all_in = [&](Layout layout) {
    std::vector<MemFormat> out;
    out.reserve(in.size());
    for (const MemFormat& f : in) out.push_back(plain_format(f.shape, f.dtype, layout));
    return out;
  };
  if (2 * channels_last_bytes > total) {
    std::vector<MemFormat> channels_last = all_in(Layout::channels_last);
    if (backend.supports(channels_last)) return channels_last;
  }
  return all_in(Layout::plain);
}

}  // namespace

void ConcatLayer::create(CreateContext& ctx) {
  ctx.in_formats = concatenable(ctx.backend, ctx.in_formats);
  kernel_ = ctx.backend.concat(ctx.in_formats);
  ctx.out_formats = {kernel_->dst_format()};
  srcs_.assign(ctx.in_formats.size(), nullptr);
  diffs_.assign(ctx.in_formats.size(), nullptr);
}

void ConcatLayer::forward(RunContext& ctx) {
  for (size_t i = 0; i < srcs_.size(); ++i) srcs_[i] = ctx.in[i];
  kernel_->forward(srcs_, ctx.out[0]);
}

void ConcatLayer::backward(RunContext& ctx) {
  for (size_t i = 0; i < diffs_.size(); ++i) diffs_[i] = ctx.diff_in[i];
  kernel_->backward(ctx.diff_out[0], diffs_);
}

// ------------------------------------------------------------------------------------ expand_as

std::vector<Shape> ExpandAsLayer::infer_shapes(const std::vector<Shape>& in) const {
  if (in.size() != 2)
    throw_input("expand_as takes two inputs: x [N, C, 1, ...] and the reference [N, C', S...]");
  const Shape& x = in[0];
  const Shape& ref = in[1];
  if (x.rank() < 3 || x.rank() != ref.rank() || x[0] != ref[0])
    throw_input(
        "expand_as needs x [N, C, 1, ...] and a reference [N, C', S...] of the same rank "
        "and batch, got " +
        x.str() + " and " + ref.str());
  Shape out = ref;
  out[1] = x[1];
  for (int d = 2; d < x.rank(); ++d)
    if (x[d] != 1)
      throw_input("expand_as input x must have spatial size 1 everywhere, got " + x.str());
  return {out};
}

void ExpandAsLayer::create(CreateContext& ctx) {
  const Shape& out = ctx.out_shapes[0];
  const ExpandDesc d{out[0], out[1], out.numel() / (out[0] * out[1]), ctx.dtype};
  kernel_ = make_kernel<ExpandKernel>(ctx.backend, d);
  // x in plain layout; the reference keeps whatever format it has, its data is never read.
  ctx.in_formats[0] = plain_format(ctx.in_shapes[0], ctx.dtype);
  ctx.out_formats = {plain_format(out, ctx.dtype)};
}

void ExpandAsLayer::forward(RunContext& ctx) { kernel_->forward(ctx.in[0], ctx.out[0]); }

void ExpandAsLayer::backward(RunContext& ctx) {
  if (ctx.diff_in[0]) kernel_->backward(ctx.diff_out[0], ctx.diff_in[0]);
}

}  // namespace crest
