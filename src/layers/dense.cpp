#include "crest/layers/dense.hpp"

#include "crest/core/error.hpp"

namespace crest {
namespace {

std::vector<AttrField<DenseOptions>> dense_fields() {
  using O = DenseOptions;
  return {attr_field("out_features", &O::out_features), attr_field("bias", &O::bias),
          attr_field("init", &O::init), attr_field("l2", &O::l2)};
}

}  // namespace

CREST_REGISTER_LAYER(dense, layer_kind<DenseLayer, DenseOptions>("dense", dense_fields()));

LayerSpec layers::dense(const DenseOptions& o) { return layer_spec("dense", dense_fields(), o); }

std::vector<Shape> DenseLayer::infer_shapes(const std::vector<Shape>& in) const {
  if (in.size() != 1 || in[0].rank() != 2)
    throw_input("dense needs one rank-2 input [N, features] (flatten first), got " +
                (in.empty() ? std::string("nothing") : in[0].str()));
  if (opts_.out_features < 1) throw_input("dense needs out_features >= 1");
  return {Shape{in[0][0], opts_.out_features}};
}

std::vector<ParamSpec> DenseLayer::param_specs(const std::vector<Shape>& in) const {
  const int64_t fin = in[0][1], fout = opts_.out_features;
  std::vector<ParamSpec> specs{{"weight", Shape{fout, fin}, opts_.init, fin, fout, opts_.l2, true}};
  if (opts_.bias)
    specs.push_back({"bias", Shape{fout},
                     opts_.init == Init::torch_default ? Init::torch_default : Init::zeros, fin,
                     fout, 0.0, true});
  return specs;
}

BackwardNeeds DenseLayer::backward_needs(size_t n_in, size_t n_out) const {
  return {std::vector<bool>(n_in, true), std::vector<bool>(n_out, false), false};
}

void DenseLayer::create(CreateContext& ctx) {
  const Shape& in = ctx.in_shapes[0];
  kernel_ = ctx.backend.dense({in[0], in[1], opts_.out_features, opts_.bias, ctx.dtype});
  ctx.in_formats[0] = plain_format(in, ctx.dtype);
  ctx.out_formats = {plain_format(ctx.out_shapes[0], ctx.dtype)};
  ctx.scratch_bytes = kernel_->scratch_bytes();
  need_input_grad_ = ctx.need_input_grad[0];
}

void DenseLayer::forward(RunContext& ctx) {
  kernel_->forward(ctx.in[0], ctx.params[0], opts_.bias ? ctx.params[1] : nullptr, ctx.out[0],
                   ctx.scratch);
}

void DenseLayer::backward(RunContext& ctx) {
  kernel_->backward_weights(ctx.in[0], ctx.diff_out[0], ctx.grads[0],
                            opts_.bias ? ctx.grads[1] : nullptr, ctx.scratch);
  if (need_input_grad_ && ctx.diff_in[0])
    kernel_->backward_data(ctx.diff_out[0], ctx.params[0], ctx.diff_in[0], ctx.scratch);
}

Flops DenseLayer::flops(const std::vector<Shape>& in, const std::vector<Shape>&) const {
  const double f = 2.0 * static_cast<double>(in[0][0] * in[0][1] * opts_.out_features);
  return {f, need_input_grad_ ? f : 0.0, f};
}

std::string DenseLayer::describe() const {
  return opts_.l2 > 0 ? "l2 " + std::to_string(opts_.l2) : "";
}

}  // namespace crest
