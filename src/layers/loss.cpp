#include "crest/layers/loss.hpp"

#include <cmath>

#include "crest/core/error.hpp"

namespace crest {
namespace {

std::vector<AttrField<SoftmaxCrossEntropyOptions>> cross_entropy_fields() {
  return {attr_field("class_weights", &SoftmaxCrossEntropyOptions::class_weights),
          attr_field("label_smoothing", &SoftmaxCrossEntropyOptions::label_smoothing),
          attr_field("scale", &SoftmaxCrossEntropyOptions::scale)};
}

}  // namespace

CREST_REGISTER_LAYER(mse_loss, layer_kind<MseLossLayer>("mse_loss"));
CREST_REGISTER_LAYER(upstream_gradient, layer_kind<UpstreamGradientLayer>("upstream_gradient"));
CREST_REGISTER_LAYER(softmax_cross_entropy,
                     layer_kind<SoftmaxCrossEntropyLayer, SoftmaxCrossEntropyOptions>(
                         "softmax_cross_entropy", cross_entropy_fields()));

LayerSpec layers::mse_loss() { return {"mse_loss", {}}; }
LayerSpec layers::softmax_cross_entropy(std::vector<float> class_weights) {
  return softmax_cross_entropy(SoftmaxCrossEntropyOptions{std::move(class_weights)});
}
LayerSpec layers::softmax_cross_entropy(const SoftmaxCrossEntropyOptions& o) {
  return layer_spec("softmax_cross_entropy", cross_entropy_fields(), o);
}

std::vector<Shape> MseLossLayer::infer_shapes(const std::vector<Shape>& in) const {
  if (in.size() != 2 || in[0] != in[1])
    throw_input("mse loss needs prediction and target of the same shape" +
                (in.size() == 2 ? ", got " + in[0].str() + " and " + in[1].str() : std::string()));
  return {Shape{1}};
}

BackwardNeeds MseLossLayer::backward_needs(size_t n_in, size_t n_out) const {
  return {std::vector<bool>(n_in, true), std::vector<bool>(n_out, false), false};
}

void MseLossLayer::create(CreateContext& ctx) {
  ctx.in_formats[0] = plain_format(ctx.in_shapes[0], ctx.dtype);
  ctx.in_formats[1] = plain_format(ctx.in_shapes[1], ctx.dtype);
  ctx.out_formats = {plain_format(Shape{1}, ctx.dtype)};
  count_ = static_cast<size_t>(ctx.in_shapes[0].numel());
}

void MseLossLayer::forward(RunContext& ctx) {
  ctx.vec->mse_into(ctx.in[0], ctx.in[1], count_, ctx.loss_out);
  ctx.vec->fill_from(ctx.out[0], ctx.loss_out, 1.0);
}

void MseLossLayer::backward(RunContext& ctx) {
  if (ctx.diff_in[0])
    ctx.vec->mse_gradient(ctx.in[0], ctx.in[1], ctx.diff_in[0], count_, ctx.loss_scale);
}

std::vector<Shape> UpstreamGradientLayer::infer_shapes(const std::vector<Shape>& in) const {
  if (in.empty() || in.size() % 2 != 0)
    throw_input("upstream_gradient needs pairs of (value, its gradient), got " +
                std::to_string(in.size()) + " inputs");
  for (size_t i = 0; i < in.size(); i += 2)
    if (in[i] != in[i + 1])
      throw_input("upstream_gradient: value " + in[i].str() + " and its gradient " +
                  in[i + 1].str() + " differ in shape");
  return {Shape{1}};
}

BackwardNeeds UpstreamGradientLayer::backward_needs(size_t n_in, size_t n_out) const {
  std::vector<bool> reads(n_in, false);
  for (size_t i = 1; i < n_in; i += 2) reads[i] = true;  // the gradients only
  return {reads, std::vector<bool>(n_out, false), false};
}

void UpstreamGradientLayer::create(CreateContext& ctx) {
  counts_.clear();
  for (size_t i = 0; i < ctx.in_shapes.size(); ++i) {
    ctx.in_formats[i] = plain_format(ctx.in_shapes[i], ctx.dtype);
    if (i % 2 == 0) counts_.push_back(static_cast<size_t>(ctx.in_shapes[i].numel()));
  }
  ctx.out_formats = {plain_format(Shape{1}, ctx.dtype)};
}

void UpstreamGradientLayer::forward(RunContext& ctx) { ctx.vec->fill(ctx.out[0], 1, 0.0); }

// The received gradient is already the scaled loss's (the last stage seeds backward with the
// loss scale): it passes unchanged, while this stage's L2 terms take the scale from the executor.
void UpstreamGradientLayer::backward(RunContext& ctx) {
  for (size_t i = 0; i < counts_.size(); ++i)
    if (ctx.diff_in[2 * i]) ctx.vec->copy(ctx.in[2 * i + 1], ctx.diff_in[2 * i], counts_[i]);
}

SoftmaxCrossEntropyLayer::SoftmaxCrossEntropyLayer(SoftmaxCrossEntropyOptions o)
    : weights_(std::move(o.class_weights)), label_smoothing_(o.label_smoothing), scale_(o.scale) {
  if (!(scale_ > 0) || !std::isfinite(scale_))
    throw_input("softmax cross-entropy: scale must be finite and positive, got " +
                std::to_string(scale_));
  if (!(label_smoothing_ >= 0 && label_smoothing_ < 1))
    throw_input("softmax cross-entropy: label_smoothing must be in [0, 1), got " +
                std::to_string(label_smoothing_));
  if (label_smoothing_ > 0 && !weights_.empty())
    throw_input(
        "softmax cross-entropy takes class_weights or label_smoothing, not both (a "
        "weighted smoothed loss has no reference rule here)");
}

std::vector<Shape> SoftmaxCrossEntropyLayer::infer_shapes(const std::vector<Shape>& in) const {
  if (in.size() != 2 || in[0].rank() < 2 || in[1].rank() != in[0].rank() - 1)
    throw_input("softmax cross-entropy needs logits [N, C, spatial...] and labels [N, spatial...]");
  for (int d = 0; d < in[1].rank(); ++d)
    if (in[1][d] != in[0][d == 0 ? 0 : d + 1])
      throw_input("labels " + in[1].str() + " do not match logits " + in[0].str());
  if (!weights_.empty() && static_cast<int64_t>(weights_.size()) != in[0][1])
    throw_input("softmax cross-entropy has " + std::to_string(weights_.size()) +
                " class weights for " + std::to_string(in[0][1]) + " classes");
  return {Shape{1}};
}

BackwardNeeds SoftmaxCrossEntropyLayer::backward_needs(size_t n_in, size_t n_out) const {
  return {std::vector<bool>(n_in, true), std::vector<bool>(n_out, false), false};
}

void SoftmaxCrossEntropyLayer::create(CreateContext& ctx) {
  const Shape& s = ctx.in_shapes[0];
  n_ = s[0];
  classes_ = s[1];
  spatial_ = s.numel() / std::max<int64_t>(n_ * classes_, 1);
  if (weights_.empty()) weights_.assign(static_cast<size_t>(classes_), 1.f);
  // The kernel reads the weights where it runs (device memory on a device backend): copied once.
  const size_t weight_bytes = weights_.size() * sizeof(float);
  memory_ = &ctx.backend.memory();
  weights_on_backend_ = Buffer(weight_bytes, 256, ctx.backend.memory());
  ctx.backend.memory().copy_to_device(weights_on_backend_.data(), weights_.data(), weight_bytes);
  ctx.in_formats[0] = plain_format(s, ctx.dtype);
  ctx.in_formats[1] = plain_format(ctx.in_shapes[1], DType::i32);
  ctx.out_formats = {plain_format(Shape{1}, ctx.dtype)};
}

void SoftmaxCrossEntropyLayer::forward(RunContext& ctx) {
  labels_ = static_cast<const int32_t*>(ctx.in[1]);
  ctx.vec->softmax_cross_entropy_into(ctx.in[0], labels_, class_weights(), label_smoothing_, n_,
                                      classes_, spatial_, ctx.loss_out);
  ctx.vec->fill_from(ctx.out[0], ctx.loss_out, scale_);
}

// A device backend's pass notes the first bad label instead of throwing: named here.
double SoftmaxCrossEntropyLayer::loss_from(const double* written) const {
  if (written[1] >= 0) {
    const auto position = static_cast<int64_t>(written[1]);
    int32_t label = 0;
    memory_->copy_to_host(&label, labels_ + position, sizeof label);
    throw_label_outside_classes(label, position, spatial_, classes_);
  }
  return scale_ * written[0];
}

void SoftmaxCrossEntropyLayer::backward(RunContext& ctx) {
  if (ctx.diff_in[0])
    ctx.vec->softmax_cross_entropy_gradient(ctx.in[0], static_cast<const int32_t*>(ctx.in[1]),
                                            class_weights(), label_smoothing_, ctx.diff_in[0], n_,
                                            classes_, spatial_, scale_ * ctx.loss_scale);
}

}  // namespace crest
