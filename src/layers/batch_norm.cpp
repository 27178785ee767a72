#include "crest/layers/batch_norm.hpp"

#include <cmath>
#include <sstream>

#include "crest/core/error.hpp"

namespace crest {
namespace {

std::vector<AttrField<BatchNormOptions>> batch_norm_fields() {
  return {attr_field("momentum", &BatchNormOptions::momentum),
          attr_field("eps", &BatchNormOptions::eps)};
}

}  // namespace

CREST_REGISTER_LAYER(batch_norm, layer_kind<BatchNormLayer, BatchNormOptions>("batch_norm",
                                                                              batch_norm_fields()));

LayerSpec layers::batch_norm(const BatchNormOptions& o) {
  return layer_spec("batch_norm", batch_norm_fields(), o);
}

BatchNormLayer::BatchNormLayer(BatchNormOptions o) : opts_(o) {
  if (!(opts_.momentum >= 0 && opts_.momentum <= 1))
    throw_input("batch_norm momentum must be in [0, 1], got " + std::to_string(opts_.momentum));
  if (!(opts_.eps > 0)) throw_input("batch_norm eps must be > 0, got " + std::to_string(opts_.eps));
}

std::vector<Shape> BatchNormLayer::infer_shapes(const std::vector<Shape>& in) const {
  if (in.size() != 1 || in[0].rank() < 3 || in[0].rank() > 5)
    throw_input("batch_norm needs one input [N, C, spatial...] with 1 to 3 spatial dimensions" +
                (in.size() == 1 ? ", got " + in[0].str() : std::string()));
  return in;
}

std::vector<ParamSpec> BatchNormLayer::param_specs(const std::vector<Shape>& in) const {
  const Shape c{in[0][1]};
  ParamSpec running_mean{"running_mean", c, Init::zeros, 1, 1, 0.0, false};
  ParamSpec running_var{"running_var", c, Init::ones, 1, 1, 0.0, false};
  running_mean.eval_stat = running_var.eval_stat = true;
  return {{"weight", c, Init::ones, 1, 1, 0.0, true},
          {"bias", c, Init::zeros, 1, 1, 0.0, true},
          running_mean,
          running_var,
          {"num_batches_tracked", Shape{1}, Init::zeros, 1, 1, 0.0, false}};
}

BackwardNeeds BatchNormLayer::backward_needs(size_t n_in, size_t n_out) const {
  // Backward reads x (and the statistics in the workspace), never y: a fused ReLU may overwrite
  // the output in place.
  return {std::vector<bool>(n_in, true), std::vector<bool>(n_out, false), false};
}

namespace {
template <typename T>
void scale_shift_of(const std::vector<void*>& params, double eps, std::vector<double>& scale,
                    std::vector<double>& shift) {
  const T* gamma = static_cast<const T*>(params[0]);
  const T* beta = static_cast<const T*>(params[1]);
  const T* mean = static_cast<const T*>(params[2]);
  const T* var = static_cast<const T*>(params[3]);
  for (size_t c = 0; c < scale.size(); ++c) {
    scale[c] = static_cast<double>(gamma[c]) / std::sqrt(static_cast<double>(var[c]) + eps);
    shift[c] = static_cast<double>(beta[c]) - static_cast<double>(mean[c]) * scale[c];
  }
}
}  // namespace

void BatchNormLayer::inference_scale_shift(const std::vector<void*>& params, DType dtype,
                                           std::vector<double>& scale,
                                           std::vector<double>& shift) const {
  if (dtype == DType::f64)
    scale_shift_of<double>(params, opts_.eps, scale, shift);
  else
    scale_shift_of<float>(params, opts_.eps, scale, shift);
}

void BatchNormLayer::create(CreateContext& ctx) {
  const Shape& s = ctx.in_shapes[0];
  BatchNormDesc d;
  d.spatial_rank = s.rank() - 2;
  d.n = s[0];
  d.channels = s[1];
  for (int i = 0; i < d.spatial_rank; ++i) d.size[static_cast<size_t>(i)] = s[2 + i];
  d.eps = opts_.eps;
  d.momentum = opts_.momentum;
  d.post_op = post_op_ = ctx.post_op;
  d.training = ctx.training;
  d.input_grad = need_input_grad_ = ctx.need_input_grad[0];
  d.src_hint = ctx.in_formats[0];
  d.dtype = ctx.dtype;
  kernel_ = make_kernel<BatchNormKernel>(ctx.backend, d);
  ctx.in_formats[0] = kernel_->format();
  ctx.out_formats = {kernel_->format()};
  ctx.workspace_bytes = ctx.training ? kernel_->workspace_bytes() : 0;
  ctx.scratch_bytes = kernel_->scratch_bytes();
}

BatchNormParams BatchNormLayer::params(const RunContext& ctx) {
  return {ctx.params[0], ctx.params[1], ctx.params[2], ctx.params[3], ctx.params[4]};
}

void BatchNormLayer::forward(RunContext& ctx) {
  if (ctx.training)
    kernel_->forward_training(ctx.in[0], params(ctx), ctx.out[0], ctx.workspace, ctx.scratch,
                              ctx.batch_stat_reducer);
  else
    kernel_->forward_inference(ctx.in[0], params(ctx), ctx.out[0], ctx.scratch);
}

void BatchNormLayer::backward(RunContext& ctx) {
  // grads[2..4] belong to the running statistics: never written, never read by an optimizer.
  kernel_->backward(ctx.in[0], ctx.diff_out[0], params(ctx), ctx.workspace,
                    need_input_grad_ ? ctx.diff_in[0] : nullptr, ctx.grads[0], ctx.grads[1],
                    ctx.scratch, ctx.batch_stat_reducer);
}

Flops BatchNormLayer::flops(const std::vector<Shape>& in, const std::vector<Shape>&) const {
  // Per element: forward sum, squared deviation and the affine normalisation (6); backward the
  // two sums (4) and the input gradient (5).
  const auto n = static_cast<double>(in[0].numel());
  return {6 * n, 5 * n, 4 * n};
}

std::string BatchNormLayer::describe() const {
  std::ostringstream os;
  os << "momentum " << opts_.momentum << " eps " << opts_.eps;
  if (post_op_.kind != EltwiseKind::none) os << " +fused act";
  return os.str();
}

}  // namespace crest
