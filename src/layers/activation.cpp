#include "crest/layers/activation.hpp"

#include <sstream>

#include "crest/core/error.hpp"

namespace crest {
namespace {

using O = EltwiseDesc;

// The kind of activation is the node's kind; its attributes are the op's parameters.
LayerKind activation_kind(const std::string& name, EltwiseKind kind,
                          std::vector<AttrField<O>> fields) {
  return layer_kind<ActivationLayer, O>(name, std::move(fields), [kind](O& o) { o.kind = kind; });
}

std::vector<AttrField<O>> slope_fields() { return {attr_field("negative_slope", &O::alpha)}; }
std::vector<AttrField<O>> scale_fields() {
  return {attr_field("scale", &O::alpha), attr_field("shift", &O::beta)};
}

}  // namespace

CREST_REGISTER_LAYER(relu, activation_kind("relu", EltwiseKind::relu, {}));
CREST_REGISTER_LAYER(leaky_relu,
                     activation_kind("leaky_relu", EltwiseKind::leaky_relu, slope_fields()));
CREST_REGISTER_LAYER(tanh, activation_kind("tanh", EltwiseKind::tanh, {}));
CREST_REGISTER_LAYER(sigmoid, activation_kind("sigmoid", EltwiseKind::sigmoid, {}));
CREST_REGISTER_LAYER(scale, activation_kind("scale", EltwiseKind::linear, scale_fields()));

LayerSpec layers::relu() { return {"relu", {}}; }
LayerSpec layers::leaky_relu(float negative_slope) {
  return layer_spec("leaky_relu", slope_fields(), O{EltwiseKind::leaky_relu, negative_slope, 0.f});
}
LayerSpec layers::tanh() { return {"tanh", {}}; }
LayerSpec layers::sigmoid() { return {"sigmoid", {}}; }
LayerSpec layers::scale(float scale, float shift) {
  return layer_spec("scale", scale_fields(), O{EltwiseKind::linear, scale, shift});
}

ActivationLayer::ActivationLayer(EltwiseDesc e) : op_(e) {
  if (op_.kind == EltwiseKind::leaky_relu && !(op_.alpha > 0.f))
    throw_input("leaky_relu needs a positive negative_slope (got " + std::to_string(op_.alpha) +
                ")");
}

std::string ActivationLayer::kind() const {
  switch (op_.kind) {
    case EltwiseKind::relu:
      return "relu";
    case EltwiseKind::leaky_relu:
      return "leaky_relu";
    case EltwiseKind::tanh:
      return "tanh";
    case EltwiseKind::sigmoid:
      return "sigmoid";
    case EltwiseKind::linear:
      return "scale";
    case EltwiseKind::none:
      break;
  }
  return "identity";
}

std::vector<Shape> ActivationLayer::infer_shapes(const std::vector<Shape>& in) const {
  if (in.size() != 1) throw_input(kind() + " takes one input");
  return in;
}

BackwardNeeds ActivationLayer::backward_needs(size_t n_in, size_t n_out) const {
  // Backward uses the output only (dst-based derivatives), which is what makes in-place legal.
  return {std::vector<bool>(n_in, false), std::vector<bool>(n_out, true), true};
}

void ActivationLayer::create(CreateContext& ctx) {
  ctx.out_formats = {ctx.in_formats[0]};
  kernel_ = ctx.backend.eltwise(op_, ctx.in_formats[0]);
}

void ActivationLayer::forward(RunContext& ctx) { kernel_->forward(ctx.in[0], ctx.out[0]); }

void ActivationLayer::backward(RunContext& ctx) {
  if (ctx.diff_in[0]) kernel_->backward(ctx.out[0], ctx.diff_out[0], ctx.diff_in[0]);
}

std::string ActivationLayer::describe() const {
  std::ostringstream os;
  if (op_.kind == EltwiseKind::leaky_relu) os << "slope " << op_.alpha;
  if (op_.kind == EltwiseKind::linear) os << "x" << op_.alpha << (op_.beta != 0.f ? " +b" : "");
  return os.str();
}

}  // namespace crest
