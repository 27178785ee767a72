// The VectorOps base: the compositions a backend may replace with a fused loop.
#include <algorithm>
#include <cmath>
#include <string>

#include "crest/backends/kernels.hpp"
#include "crest/core/error.hpp"

namespace crest {

double trust_ratio(double w_norm, double g_norm, double trust_coefficient, double weight_decay,
                   double eps) {
  if (w_norm == 0 || g_norm == 0) return 1.0;
  return trust_coefficient * w_norm / (g_norm + weight_decay * w_norm + eps);
}

double lamb_trust_ratio(double w_sum_squares, double u_sum_squares) {
  const double w_norm = std::sqrt(w_sum_squares), u_norm = std::sqrt(u_sum_squares);
  return w_norm != 0 && u_norm != 0 ? w_norm / u_norm : 1.0;
}

void throw_label_outside_classes(int32_t label, int64_t position, int64_t spatial,
                                 int64_t classes) {
  throw_input("softmax_cross_entropy: label " + std::to_string(label) + " at batch " +
              std::to_string(position / spatial) + ", position " +
              std::to_string(position % spatial) + " is outside [0, " + std::to_string(classes) +
              ")");
}

VectorOps::SquareSums VectorOps::lamb_direction_with_norms(const void* w, void* g, void* m, void* v,
                                                           size_t count, double grad_divisor,
                                                           double beta1, double beta2, double eps,
                                                           double weight_decay, int64_t step) {
  lamb_direction(w, g, m, v, count, grad_divisor, beta1, beta2, eps, weight_decay, step);
  return SquareSums{sum_squares(w, count), sum_squares(g, count)};
}

void VectorOps::lamb_direction_with_norms_into(const void* w, void* g, void* m, void* v,
                                               size_t count, const UpdateStep* at, double beta1,
                                               double beta2, double eps, double weight_decay,
                                               double* sums) {
  const SquareSums s = lamb_direction_with_norms(w, g, m, v, count, at->grad_divisor, beta1, beta2,
                                                 eps, weight_decay, at->step);
  sums[0] = s.w;
  sums[1] = s.u;
}

void VectorOps::lamb_trust_update(void* w, const void* u, size_t count, const UpdateStep* at,
                                  const double* sums) {
  const double ratio = sums ? lamb_trust_ratio(sums[0], sums[1]) : 1.0;
  axpy(-at->lr * ratio, u, w, count);
}

void VectorOps::lag_correction(void* grads, const void* average, void* own_previous, void* sent,
                               size_t count, double own_scale, bool replace_share) {
  copy(grads, sent, count);
  if (replace_share) axpy(-1.0, average, own_previous, count);
  scale(own_scale, sent, grads, count);
  if (replace_share) axpy(-1.0, own_previous, grads, count);
  scale(own_scale, sent, own_previous, count);
}

void VectorOps::sgd_keras_at_step(void* w, const void* g, void* v, size_t count,
                                  const UpdateStep* at, double momentum, bool nesterov) {
  sgd_keras(w, g, v, count, at->lr, momentum, nesterov);
}

void VectorOps::adam_at_step(void* w, const void* g, void* m, void* v, size_t count,
                             const UpdateStep* at, double beta1, double beta2, double eps,
                             double weight_decay, bool decoupled) {
  adam(w, g, m, v, count, at->lr, beta1, beta2, eps, weight_decay, decoupled, at->step);
}

void VectorOps::lars_update_at_step(void* w, const void* g, void* buf, size_t count,
                                    const UpdateStep* at, double momentum, double grad_scale,
                                    double weight_decay) {
  lars_update(w, g, buf, count, at->lr, momentum, grad_scale, weight_decay);
}

void VectorOps::lamb_direction_at_step(const void* w, void* g, void* m, void* v, size_t count,
                                       const UpdateStep* at, double beta1, double beta2, double eps,
                                       double weight_decay) {
  lamb_direction(w, g, m, v, count, at->grad_divisor, beta1, beta2, eps, weight_decay, at->step);
}

void VectorOps::sum_squares_into(const void* x, size_t count, double* out) {
  out[0] = sum_squares(x, count);
}

void VectorOps::mse_into(const void* pred, const void* target, size_t count, double* out) {
  out[0] = mse(pred, target, nullptr, count, 1.0);
}

void VectorOps::softmax_cross_entropy_into(const void* logits, const int32_t* labels,
                                           const float* class_weights, double label_smoothing,
                                           int64_t n, int64_t classes, int64_t spatial,
                                           double* out) {
  out[0] = softmax_cross_entropy(logits, labels, class_weights, label_smoothing, nullptr, n,
                                 classes, spatial, 1.0);
  out[1] = -1;
}

void VectorOps::mse_gradient(const void* pred, const void* target, void* diff, size_t count,
                             double diff_scale) {
  mse(pred, target, diff, count, diff_scale);
}

void VectorOps::softmax_cross_entropy_gradient(const void* logits, const int32_t* labels,
                                               const float* class_weights, double label_smoothing,
                                               void* diff_logits, int64_t n, int64_t classes,
                                               int64_t spatial, double diff_scale) {
  softmax_cross_entropy(logits, labels, class_weights, label_smoothing, diff_logits, n, classes,
                        spatial, diff_scale);
}

void VectorOps::fill_from(void* x, const double* value, double factor) {
  fill(x, 1, factor * value[0]);
}

void VectorOps::flag_nonfinite(const double* values, size_t n, void* flag) {
  for (size_t i = 0; i < n; ++i)
    if (!std::isfinite(values[i])) return fill(flag, 1, 1.0);
}

namespace {

double ratio_of(const VectorOps::TrustRatioAt& r) {
  return trust_ratio(std::sqrt(*r.w_sq), std::sqrt(*r.g_sq), r.coefficient, r.weight_decay, r.eps);
}

}  // namespace

void VectorOps::range_sum_squares_into(const void* a, const void* b, const ElementRange* ranges,
                                       size_t n, double* sums) {
  range_sum_squares(a, b, ranges, n, sums, sums + n);
}

void VectorOps::lars_trust_update(void* w, const void* g, void* buf, size_t count,
                                  const UpdateStep* at, double momentum,
                                  const TrustRatioAt& ratio) {
  lars_update(w, g, buf, count, at->lr, momentum, ratio_of(ratio), ratio.weight_decay);
}

void VectorOps::sgd_keras_trust_update(void* w, void* g, void* v, size_t count,
                                       const UpdateStep* at, double momentum,
                                       const TrustRatioAt& ratio) {
  if (ratio.weight_decay != 0) axpy(ratio.weight_decay, w, g, count);
  sgd_keras(w, g, v, count, at->lr * ratio_of(ratio), momentum, false);
}

void VectorOps::larc_trust_rescale(void* g, const void* w, size_t count, const TrustRatioAt& ratio,
                                   bool clip, const UpdateStep* at) {
  if (*ratio.w_sq == 0 || *ratio.g_sq == 0) return;  // apex: no rescaling, no weight decay
  const double a = larc_factor(ratio_of(ratio), clip, at->lr);
  if (ratio.weight_decay != 0) axpy(ratio.weight_decay, w, g, count);
  scale(a, g, g, count);
}

double larc_factor(double ratio, bool clip, double lr) {
  // lr 0 clips to 1 (a / 0 is infinite): the step is 0 anyway.
  return clip ? std::min(ratio / lr, 1.0) : ratio;
}

void VectorOps::widen_into(const void* x, size_t n, double* out) {
  if (dtype() == DType::f64) return void(std::copy_n(static_cast<const double*>(x), n, out));
  CREST_CHECK(dtype() == DType::f32, "widen_into reads float32 or float64");
  std::copy_n(static_cast<const float*>(x), n, out);
}

uint64_t dropout_seed(uint64_t run_seed, uint64_t step, uint64_t stream) {
  const uint64_t step_seed =
      (run_seed + 0x9E3779B97F4A7C15ull) * (step * 0xBF58476D1CE4E5B9ull + 1);
  return step_seed ^ (stream * 0x94D049BB133111EBull);
}

void VectorOps::dropout_at_step(const void* x, void* dst, size_t count, float p,
                                const DropoutSeed& s, uint64_t first) {
  dropout_at(x, dst, count, p, dropout_seed(s.run_seed, *s.step, s.stream), first);
}

void VectorOps::set_counter(uint64_t* counter, uint64_t value) { *counter = value; }

void VectorOps::increment_counter(uint64_t* counter) { ++*counter; }

}  // namespace crest
