#include "crest/layers/elementwise.hpp"

#include <sstream>

#include "crest/core/error.hpp"

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
  ctx.out_formats = {ctx.in_formats[0]};
  count_ = ctx.in_formats[0].bytes / dtype_size(ctx.dtype);
  training_ = ctx.training;
}

void DropoutLayer::forward(RunContext& ctx) {
  if (ctx.training && p_ > 0.f)
    ctx.vec->dropout(ctx.in[0], ctx.out[0], count_, p_, ctx.seed);
  else if (ctx.out[0] != ctx.in[0])
    ctx.vec->copy(ctx.in[0], ctx.out[0], count_);
}

void DropoutLayer::backward(RunContext& ctx) {
  if (!ctx.diff_in[0]) return;
  // The same (seed, index) mask and scale applied to the gradient is the exact derivative.
  if (p_ > 0.f)
    ctx.vec->dropout(ctx.diff_out[0], ctx.diff_in[0], count_, p_, ctx.seed);
  else if (ctx.diff_in[0] != ctx.diff_out[0])
    ctx.vec->copy(ctx.diff_out[0], ctx.diff_in[0], count_);
}

std::string DropoutLayer::describe() const {
  std::ostringstream os;
  os << "p " << p_;
  return os.str();
}

}  // namespace crest
