#include "crest/layers/elementwise.hpp"

#include <cstddef>
#include <sstream>

#include "crest/core/error.hpp"
#include "crest/graph/spatial_split.hpp"

namespace crest {
namespace {

std::vector<AttrField<DropoutOptions>> dropout_fields() {
  return {attr_field("p", &DropoutOptions::p)};
}

}  // namespace

CREST_REGISTER_LAYER(add, layer_kind<AddLayer>("add"));
CREST_REGISTER_LAYER(dropout,
                     layer_kind<DropoutLayer, DropoutOptions>("dropout", dropout_fields()));

LayerSpec layers::add() { return {"add", {}}; }
LayerSpec layers::dropout(float p) {
  return layer_spec("dropout", dropout_fields(), DropoutOptions{p});
}

std::vector<Shape> AddLayer::infer_shapes(const std::vector<Shape>& in) const {
  if (in.size() != 2 || in[0] != in[1])
    throw_input("add needs two inputs of the same shape" +
                (in.size() == 2 ? ", got " + in[0].str() + " and " + in[1].str() : std::string()));
  return {in[0]};
}

void AddLayer::create(CreateContext& ctx) {
  ctx.in_formats[1] = ctx.in_formats[0];
  ctx.out_formats = {ctx.in_formats[0]};
  count_ = ctx.in_formats[0].bytes / dtype_size(ctx.dtype);
}

void AddLayer::forward(RunContext& ctx) { ctx.vec->add(ctx.in[0], ctx.in[1], ctx.out[0], count_); }

void AddLayer::backward(RunContext& ctx) {
  for (size_t i = 0; i < 2; ++i)
    if (ctx.diff_in[i]) ctx.vec->copy(ctx.diff_out[0], ctx.diff_in[i], count_);
}

BackwardNeeds DropoutLayer::backward_needs(size_t n_in, size_t n_out) const {
  return {std::vector<bool>(n_in, false), std::vector<bool>(n_out, false), true};
}

DropoutLayer::DropoutLayer(DropoutOptions o) : p_(o.p) {
  if (!(p_ >= 0.f && p_ < 1.f))
    throw_input("dropout rate p must be in [0, 1), got " + std::to_string(p_));
}

void DropoutLayer::create(CreateContext& ctx) {
  const Shape& shape = ctx.in_shapes[0];
  if (shape.rank() > 2) ctx.in_formats[0] = plain_format(shape, ctx.in_formats[0].dtype);
  ctx.out_formats = {ctx.in_formats[0]};
  element_bytes_ = dtype_size(ctx.dtype);
  count_ = ctx.in_formats[0].bytes / element_bytes_;
  training_ = ctx.training;
  if (!ctx.spatial) {
    runs_ = {{0, 0, count_}};
  } else if (shape.rank() == 2) {  // a flattened block: the whole value's shape unflattened
    const Shape& global = ctx.global_in_shapes[0];
    runs_ = feature_runs(shape, global.numel() / global[0], ctx.spatial->feature_runs(global));
  } else {
    runs_ = block_runs(shape, ctx.global_in_shapes[0],
                       ctx.spatial->block_start(ctx.global_in_shapes[0]));
  }
}

// A flattened block [n, block features], each sample's features `runs` of the whole value's
// `whole_features` ({first whole feature, count}, in the block's order).
std::vector<DropoutLayer::Run> DropoutLayer::feature_runs(
    const Shape& block, int64_t whole_features,
    const std::vector<std::pair<int64_t, int64_t>>& runs) {
  std::vector<Run> out;
  size_t offset = 0;
  for (int64_t i = 0; i < block[0]; ++i)
    for (const auto& [first, count] : runs) {
      out.push_back(
          {offset, static_cast<uint64_t>(i * whole_features + first), static_cast<size_t>(count)});
      offset += static_cast<size_t>(count);
    }
  CREST_CHECK(offset == static_cast<size_t>(block.numel()),
              "a flattened block's feature runs cover its features");
  return out;
}

// The block [n, c, b...] starting at `start` (per spatial axis) in the whole tensor [n, c, g...],
// both plain: the spatial axes after the innermost one the block cuts are whole, so each run
// spans the cut axis's rows of the block and every axis after it.
std::vector<DropoutLayer::Run> DropoutLayer::block_runs(const Shape& block, const Shape& whole,
                                                        const std::vector<int64_t>& start) {
  const int rank = whole.rank();
  int cut = rank - 1;
  while (cut >= 2 && block[cut] == whole[cut]) --cut;
  if (cut < 2) return {{0, 0, static_cast<size_t>(block.numel())}};
  int64_t length = block[cut];
  for (int a = cut + 1; a < rank; ++a) length *= whole[a];
  auto origin = [&](int a) { return a < 2 ? int64_t{0} : start[static_cast<size_t>(a - 2)]; };
  std::vector<int64_t> index(static_cast<size_t>(cut), 0);  // over the axes before the cut one
  std::vector<Run> runs;
  for (int64_t offset = 0; offset < block.numel(); offset += length) {
    int64_t first = 0;
    for (int a = 0; a < rank; ++a)
      first = first * whole[a] + origin(a) + (a < cut ? index[static_cast<size_t>(a)] : 0);
    runs.push_back(
        {static_cast<size_t>(offset), static_cast<uint64_t>(first), static_cast<size_t>(length)});
    for (int a = cut - 1; a >= 0 && ++index[static_cast<size_t>(a)] == block[a]; --a)
      index[static_cast<size_t>(a)] = 0;
  }
  return runs;
}

void DropoutLayer::apply(VectorOps& vec, const void* x, void* dst,
                         const VectorOps::DropoutSeed& seed) const {
  for (const Run& r : runs_)
    vec.dropout_at_step(static_cast<const std::byte*>(x) + r.offset * element_bytes_,
                        static_cast<std::byte*>(dst) + r.offset * element_bytes_, r.count, p_, seed,
                        r.first);
}

void DropoutLayer::forward(RunContext& ctx) {
  if (ctx.training && p_ > 0.f)
    apply(*ctx.vec, ctx.in[0], ctx.out[0], ctx.random);
  else if (ctx.out[0] != ctx.in[0])
    ctx.vec->copy(ctx.in[0], ctx.out[0], count_);
}

void DropoutLayer::backward(RunContext& ctx) {
  if (!ctx.diff_in[0]) return;
  // The same (seed, index) mask and scale applied to the gradient is the exact derivative.
  if (p_ > 0.f)
    apply(*ctx.vec, ctx.diff_out[0], ctx.diff_in[0], ctx.random);
  else if (ctx.diff_in[0] != ctx.diff_out[0])
    ctx.vec->copy(ctx.diff_out[0], ctx.diff_in[0], count_);
}

std::string DropoutLayer::describe() const {
  std::ostringstream os;
  os << "p " << p_;
  return os.str();
}

}  // namespace crest
