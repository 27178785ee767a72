#include "crest/layers/channel_affine.hpp"

#include "crest/core/error.hpp"

namespace crest {
namespace {

std::vector<AttrField<ChannelAffineOptions>> channel_affine_fields() {
  return {attr_field("shift", &ChannelAffineOptions::shift)};
}

}  // namespace

CREST_REGISTER_LAYER(channel_affine,
                     layer_kind<ChannelAffineLayer, ChannelAffineOptions>("channel_affine",
                                                                          channel_affine_fields()));

LayerSpec layers::channel_affine(bool shift) {
  return layer_spec("channel_affine", channel_affine_fields(), ChannelAffineOptions{shift});
}

std::vector<Shape> ChannelAffineLayer::infer_shapes(const std::vector<Shape>& in) const {
  if (in.size() != 1 || in[0].rank() < 2)
    throw_input("channel_affine needs one input [N, C, spatial...]");
  return in;
}

std::vector<ParamSpec> ChannelAffineLayer::param_specs(const std::vector<Shape>& in) const {
  const int64_t c = in[0][1];
  std::vector<ParamSpec> specs{{"weight", Shape{c}, Init::ones, 1, 1, 0.0, true}};
  if (opts_.shift) specs.push_back({"bias", Shape{c}, Init::zeros, 1, 1, 0.0, true});
  return specs;
}

BackwardNeeds ChannelAffineLayer::backward_needs(size_t n_in, size_t n_out) const {
  return {std::vector<bool>(n_in, true), std::vector<bool>(n_out, false), false};
}

void ChannelAffineLayer::create(CreateContext& ctx) {
  const Shape& s = ctx.in_shapes[0];
  const ChannelAffineDesc d{s[0], s[1], s.numel() / (s[0] * s[1]), opts_.shift, ctx.dtype};
  kernel_ = make_kernel<ChannelAffineKernel>(ctx.backend, d);
  ctx.in_formats[0] = plain_format(s, ctx.dtype);
  ctx.out_formats = {plain_format(s, ctx.dtype)};
  need_input_grad_ = ctx.need_input_grad[0];
}

void ChannelAffineLayer::forward(RunContext& ctx) {
  kernel_->forward(ctx.in[0], ctx.params[0], opts_.shift ? ctx.params[1] : nullptr, ctx.out[0]);
}

void ChannelAffineLayer::backward(RunContext& ctx) {
  kernel_->backward_weights(ctx.in[0], ctx.diff_out[0], ctx.grads[0],
                            opts_.shift ? ctx.grads[1] : nullptr);
  if (need_input_grad_ && ctx.diff_in[0])
    kernel_->backward_data(ctx.diff_out[0], ctx.params[0], ctx.diff_in[0]);
}

Flops ChannelAffineLayer::flops(const std::vector<Shape>& in, const std::vector<Shape>&) const {
  const auto f = 2.0 * static_cast<double>(in[0].numel());
  return {f, f / 2, f};
}

}  // namespace crest
