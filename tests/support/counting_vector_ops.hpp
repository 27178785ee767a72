// VectorOps that count the calls a GPU would have to wait for: those that hand a value computed
// from the backend's memory back to the host (a loss, a sum of squares, a largest magnitude). A
// pretend device (CountingBackend) runs the reference's ops through it, so a test sees where a
// training step would stop for the device although every value is computed on the host; and it
// notes a bad label where a device's pass would, instead of throwing.
#pragma once
#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "crest/backends/kernels.hpp"

namespace crest::test {

// The dropout kernels queued so far: how many were handed their seed by the host (a captured step
// would replay that seed), and the arguments of those that read the step counter, in order.
struct DropoutCalls {
  using AtStep = std::tuple<const void*, void*, size_t, float, uint64_t, uint64_t, const uint64_t*,
                            uint64_t>;  // x, dst, count, p, run seed, stream, counter, first
  int host_seeded = 0;
  std::vector<AtStep> at_step;
};

// The optimizer update kernels queued so far: how many were handed the step's rate or count by
// the host (a captured update would replay them), and each of those that read them from the
// backend's memory (VectorOps::UpdateStep), as its name and every argument, in order.
struct UpdateCalls {
  int host_rated = 0;
  std::vector<std::string> at_step;
};

class CountingVectorOps final : public VectorOps {
 public:
  CountingVectorOps(std::unique_ptr<VectorOps> inner, int* reads, DropoutCalls* dropouts = nullptr,
                    UpdateCalls* updates = nullptr)
      : inner_(std::move(inner)), reads_(reads), dropouts_(dropouts), updates_(updates) {}

  DType dtype() const override { return inner_->dtype(); }
  void fill(void* x, size_t count, double value) override { inner_->fill(x, count, value); }
  void copy(const void* src, void* dst, size_t count) override { inner_->copy(src, dst, count); }
  void add(const void* a, const void* b, void* dst, size_t count) override {
    inner_->add(a, b, dst, count);
  }
  void axpy(double alpha, const void* x, void* y, size_t count) override {
    inner_->axpy(alpha, x, y, count);
  }
  void scale(double alpha, const void* x, void* dst, size_t count) override {
    inner_->scale(alpha, x, dst, count);
  }
  void lag_correction(void* grads, const void* average, void* own_previous, void* sent,
                      size_t count, double own_scale, bool replace_share) override {
    inner_->lag_correction(grads, average, own_previous, sent, count, own_scale, replace_share);
  }
  void dropout_at(const void* x, void* dst, size_t count, float p, uint64_t seed,
                  uint64_t first) override {
    if (dropouts_) ++dropouts_->host_seeded;
    inner_->dropout_at(x, dst, count, p, seed, first);
  }
  void dropout_at_step(const void* x, void* dst, size_t count, float p, const DropoutSeed& s,
                       uint64_t first) override {
    if (dropouts_)
      dropouts_->at_step.emplace_back(x, dst, count, p, s.run_seed, s.stream, s.step, first);
    inner_->dropout_at_step(x, dst, count, p, s, first);
  }
  void set_counter(uint64_t* counter, uint64_t value) override {
    inner_->set_counter(counter, value);
  }
  void increment_counter(uint64_t* counter) override { inner_->increment_counter(counter); }
  void sgd_keras(void* w, const void* g, void* v, size_t count, double lr, double momentum,
                 bool nesterov) override {
    host_rated();
    inner_->sgd_keras(w, g, v, count, lr, momentum, nesterov);
  }
  void adam(void* w, const void* g, void* m, void* v, size_t count, double lr, double beta1,
            double beta2, double eps, double weight_decay, bool decoupled, int64_t step) override {
    host_rated();
    inner_->adam(w, g, m, v, count, lr, beta1, beta2, eps, weight_decay, decoupled, step);
  }
  void lars_update(void* w, const void* g, void* buf, size_t count, double lr, double momentum,
                   double grad_scale, double weight_decay) override {
    host_rated();
    inner_->lars_update(w, g, buf, count, lr, momentum, grad_scale, weight_decay);
  }
  void lamb_direction(const void* w, void* g, void* m, void* v, size_t count, double grad_divisor,
                      double beta1, double beta2, double eps, double weight_decay,
                      int64_t step) override {
    host_rated();
    inner_->lamb_direction(w, g, m, v, count, grad_divisor, beta1, beta2, eps, weight_decay, step);
  }
  void sgd_keras_at_step(void* w, const void* g, void* v, size_t count, const UpdateStep* at,
                         double momentum, bool nesterov) override {
    note("sgd_keras_at_step", w, g, v, count, at, momentum, nesterov);
    inner_->sgd_keras_at_step(w, g, v, count, at, momentum, nesterov);
  }
  void adam_at_step(void* w, const void* g, void* m, void* v, size_t count, const UpdateStep* at,
                    double beta1, double beta2, double eps, double weight_decay,
                    bool decoupled) override {
    note("adam_at_step", w, g, m, v, count, at, beta1, beta2, eps, weight_decay, decoupled);
    inner_->adam_at_step(w, g, m, v, count, at, beta1, beta2, eps, weight_decay, decoupled);
  }
  void lars_update_at_step(void* w, const void* g, void* buf, size_t count, const UpdateStep* at,
                           double momentum, double grad_scale, double weight_decay) override {
    note("lars_update_at_step", w, g, buf, count, at, momentum, grad_scale, weight_decay);
    inner_->lars_update_at_step(w, g, buf, count, at, momentum, grad_scale, weight_decay);
  }
  void lamb_direction_at_step(const void* w, void* g, void* m, void* v, size_t count,
                              const UpdateStep* at, double beta1, double beta2, double eps,
                              double weight_decay) override {
    note("lamb_direction_at_step", w, g, m, v, count, at, beta1, beta2, eps, weight_decay);
    inner_->lamb_direction_at_step(w, g, m, v, count, at, beta1, beta2, eps, weight_decay);
  }
  void widen(const void* src, DType from, void* dst, size_t count) override {
    inner_->widen(src, from, dst, count);
  }

  // Values back to the host: each a wait for the device.
  double sum_squares(const void* x, size_t count) override {
    ++*reads_;
    return inner_->sum_squares(x, count);
  }
  void range_sum_squares(const void* a, const void* b, const ElementRange* ranges, size_t n,
                         double* a_sq, double* b_sq) override {
    ++*reads_;
    inner_->range_sum_squares(a, b, ranges, n, a_sq, b_sq);
  }
  double mse(const void* pred, const void* target, void* diff, size_t count,
             double diff_scale) override {
    ++*reads_;
    return inner_->mse(pred, target, diff, count, diff_scale);
  }
  double softmax_cross_entropy(const void* logits, const int32_t* labels,
                               const float* class_weights, double label_smoothing,
                               void* diff_logits, int64_t n, int64_t classes, int64_t spatial,
                               double diff_scale) override {
    ++*reads_;
    return inner_->softmax_cross_entropy(logits, labels, class_weights, label_smoothing,
                                         diff_logits, n, classes, spatial, diff_scale);
  }
  SquareSums lamb_direction_with_norms(const void* w, void* g, void* m, void* v, size_t count,
                                       double grad_divisor, double beta1, double beta2, double eps,
                                       double weight_decay, int64_t step) override {
    ++*reads_;
    return inner_->lamb_direction_with_norms(w, g, m, v, count, grad_divisor, beta1, beta2, eps,
                                             weight_decay, step);
  }
  double narrow(const void* x, double scale, void* dst, size_t count, DType to) override {
    ++*reads_;
    return inner_->narrow(x, scale, dst, count, to);
  }

  // Values left in the backend's memory: no wait (the inner ops' host defaults compute them).
  void sum_squares_into(const void* x, size_t count, double* out) override {
    inner_->sum_squares_into(x, count, out);
  }
  void mse_into(const void* pred, const void* target, size_t count, double* out) override {
    inner_->mse_into(pred, target, count, out);
  }
  // As a device does, a bad label is noted, not thrown, during the pass (Layer::loss_from).
  void softmax_cross_entropy_into(const void* logits, const int32_t* labels,
                                  const float* class_weights, double label_smoothing, int64_t n,
                                  int64_t classes, int64_t spatial, double* out) override {
    if (const int64_t bad = first_bad_label(labels, n * spatial, classes); bad >= 0) {
      out[0] = 0;
      out[1] = static_cast<double>(bad);
      return;
    }
    inner_->softmax_cross_entropy_into(logits, labels, class_weights, label_smoothing, n, classes,
                                       spatial, out);
  }
  void mse_gradient(const void* pred, const void* target, void* diff, size_t count,
                    double diff_scale) override {
    inner_->mse_gradient(pred, target, diff, count, diff_scale);
  }
  void softmax_cross_entropy_gradient(const void* logits, const int32_t* labels,
                                      const float* class_weights, double label_smoothing,
                                      void* diff_logits, int64_t n, int64_t classes,
                                      int64_t spatial, double diff_scale) override {
    if (first_bad_label(labels, n * spatial, classes) >= 0) return;  // named when read
    inner_->softmax_cross_entropy_gradient(logits, labels, class_weights, label_smoothing,
                                           diff_logits, n, classes, spatial, diff_scale);
  }
  void fill_from(void* x, const double* value, double factor) override {
    inner_->fill_from(x, value, factor);
  }
  void lamb_direction_with_norms_into(const void* w, void* g, void* m, void* v, size_t count,
                                      const UpdateStep* at, double beta1, double beta2, double eps,
                                      double weight_decay, double* sums) override {
    note("lamb_direction_with_norms_into", w, g, m, v, count, at, beta1, beta2, eps, weight_decay,
         sums);
    inner_->lamb_direction_with_norms_into(w, g, m, v, count, at, beta1, beta2, eps, weight_decay,
                                           sums);
  }
  void lamb_trust_update(void* w, const void* u, size_t count, const UpdateStep* at,
                         const double* sums) override {
    note("lamb_trust_update", w, u, count, at, sums);
    inner_->lamb_trust_update(w, u, count, at, sums);
  }
  void flag_nonfinite(const double* values, size_t n, void* flag) override {
    inner_->flag_nonfinite(values, n, flag);
  }
  void widen_into(const void* x, size_t n, double* out) override { inner_->widen_into(x, n, out); }
  void range_sum_squares_into(const void* a, const void* b, const ElementRange* ranges, size_t n,
                              double* sums) override {
    inner_->range_sum_squares_into(a, b, ranges, n, sums);
  }
  void lars_trust_update(void* w, const void* g, void* buf, size_t count, const UpdateStep* at,
                         double momentum, const TrustRatioAt& ratio) override {
    note("lars_trust_update", w, g, buf, count, at, momentum, ratio.w_sq, ratio.g_sq,
         ratio.coefficient, ratio.weight_decay, ratio.eps);
    inner_->lars_trust_update(w, g, buf, count, at, momentum, ratio);
  }
  void sgd_keras_trust_update(void* w, void* g, void* v, size_t count, const UpdateStep* at,
                              double momentum, const TrustRatioAt& ratio) override {
    note("sgd_keras_trust_update", w, g, v, count, at, momentum, ratio.w_sq, ratio.g_sq,
         ratio.coefficient, ratio.weight_decay, ratio.eps);
    inner_->sgd_keras_trust_update(w, g, v, count, at, momentum, ratio);
  }
  void larc_trust_rescale(void* g, const void* w, size_t count, const TrustRatioAt& ratio,
                          bool clip, const UpdateStep* at) override {
    note("larc_trust_rescale", g, w, count, ratio.w_sq, ratio.g_sq, ratio.coefficient,
         ratio.weight_decay, ratio.eps, clip, at);
    inner_->larc_trust_rescale(g, w, count, ratio, clip, at);
  }

 private:
  void host_rated() {
    if (updates_) ++updates_->host_rated;
  }
  // One line: the kernel's name and its arguments as a captured launch would keep them.
  template <typename... Args>
  void note(const char* kernel, const Args&... args) {
    if (!updates_) return;
    std::ostringstream line;
    line << kernel;
    ((line << ' ' << args), ...);
    updates_->at_step.push_back(line.str());
  }

  static int64_t first_bad_label(const int32_t* labels, int64_t positions, int64_t classes) {
    for (int64_t q = 0; q < positions; ++q)
      if (labels[q] < 0 || labels[q] >= classes) return q;
    return -1;
  }

  std::unique_ptr<VectorOps> inner_;
  int* reads_;
  DropoutCalls* dropouts_;
  UpdateCalls* updates_;
};

}  // namespace crest::test
