// Reference flat-buffer operations: fills, BLAS-1, dropout, losses and optimizer updates.
// Sums and optimizer arithmetic run in double whatever T is, so the f32 oracle loses no more
// precision than the storage type forces; LAMB's direction is the exception: it runs in T, as
// apex's FusedLAMB does for float32 parameters.
#include <algorithm>
#include <cmath>
#include <string>

#include "dropout_hash.hpp"
#include "float16_codes.hpp"
#include "half_vector_ops.hpp"
#include "lag_correction_element.hpp"
#include "reference/reference_kernels.hpp"
#include "vector_op_checks.hpp"

namespace crest::reference {
namespace {

template <typename T>
class Ops final : public VectorOps {
 public:
  DType dtype() const override { return dtype_of<T>::value; }

  void fill(void* x, size_t count, double value) override {
    T* p = static_cast<T*>(x);
    for (size_t i = 0; i < count; ++i) p[i] = static_cast<T>(value);
  }

  void copy(const void* src, void* dst, size_t count) override {
    const T* s = static_cast<const T*>(src);
    T* d = static_cast<T*>(dst);
    for (size_t i = 0; i < count; ++i) d[i] = s[i];
  }

  void add(const void* a, const void* b, void* dst, size_t count) override {
    const T* x = static_cast<const T*>(a);
    const T* y = static_cast<const T*>(b);
    T* d = static_cast<T*>(dst);
    for (size_t i = 0; i < count; ++i) d[i] = x[i] + y[i];
  }

  void axpy(double alpha, const void* x, void* y, size_t count) override {
    const T* s = static_cast<const T*>(x);
    T* d = static_cast<T*>(y);
    for (size_t i = 0; i < count; ++i) d[i] = static_cast<T>(alpha * s[i] + d[i]);
  }

  void scale(double alpha, const void* x, void* dst, size_t count) override {
    const T* s = static_cast<const T*>(x);
    T* d = static_cast<T*>(dst);
    for (size_t i = 0; i < count; ++i) d[i] = static_cast<T>(alpha * s[i]);
  }

  double sum_squares(const void* x, size_t count) override {
    const T* s = static_cast<const T*>(x);
    double acc = 0.0;
    for (size_t i = 0; i < count; ++i) acc += static_cast<double>(s[i]) * s[i];
    return acc;
  }

  void range_sum_squares(const void* a_v, const void* b_v, const ElementRange* ranges, size_t n,
                         double* a_sq, double* b_sq) override {
    const T* a = static_cast<const T*>(a_v);
    const T* b = static_cast<const T*>(b_v);
    for (size_t r = 0; r < n; ++r) {
      double sa = 0.0, sb = 0.0;
      for (size_t i = ranges[r].offset; i < ranges[r].offset + ranges[r].count; ++i) {
        sa += static_cast<double>(a[i]) * a[i];
        sb += static_cast<double>(b[i]) * b[i];
      }
      a_sq[r] = sa;
      b_sq[r] = sb;
    }
  }

  void dropout_at(const void* x, void* dst, size_t count, float p, uint64_t seed,
                  uint64_t first) override {
    if (!(p >= 0.f && p <= 1.f))
      throw_input("dropout: rate must be in [0, 1], got " + std::to_string(p));
    const T* s = static_cast<const T*>(x);
    T* d = static_cast<T*>(dst);
    // p == 1 keeps nothing (u < 1 always), so the infinite scale is never used.
    const double keep_scale = p < 1.f ? 1.0 / (1.0 - static_cast<double>(p)) : 0.0;
    for (size_t i = 0; i < count; ++i) {
      const bool keep = dropout_uniform(seed, first + i) >= static_cast<double>(p);
      d[i] = keep ? static_cast<T>(s[i] * keep_scale) : T(0);
    }
  }

  double mse(const void* pred, const void* target, void* diff, size_t count,
             double diff_scale) override {
    if (count == 0) throw_input("mse: needs at least one element");
    const T* p = static_cast<const T*>(pred);
    const T* t = static_cast<const T*>(target);
    T* g = static_cast<T*>(diff);  // may be null when only the loss is wanted
    double acc = 0.0;
    const double grad_scale = 2.0 / static_cast<double>(count) * diff_scale;
    for (size_t i = 0; i < count; ++i) {
      const double e = static_cast<double>(p[i]) - static_cast<double>(t[i]);
      acc += e * e;
      if (g) g[i] = static_cast<T>(grad_scale * e);
    }
    return acc / static_cast<double>(count);
  }

  double softmax_cross_entropy(const void* logits_v, const int32_t* labels,
                               const float* class_weights, double label_smoothing,
                               void* diff_logits, int64_t n, int64_t classes, int64_t spatial,
                               double diff_scale) override {
    check_softmax_cross_entropy_sizes(n, classes, spatial, label_smoothing);
    const double spread = label_smoothing / static_cast<double>(classes);  // every class's share
    const T* logits = static_cast<const T*>(logits_v);
    T* diff = static_cast<T*>(diff_logits);  // may be null when only the loss is wanted
    const double positions = static_cast<double>(n * spatial);
    double loss = 0.0;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t s = 0; s < spatial; ++s) {
        const int32_t label = labels[b * spatial + s];
        if (label < 0 || label >= classes)
          throw_label_outside_classes(label, b * spatial + s, spatial, classes);
        // Channel c of this position sits at (b * classes + c) * spatial + s.
        auto at = [&](int64_t c) { return (b * classes + c) * spatial + s; };
        // log-sum-exp shifted by the maximum so exp never overflows.
        double max_logit = static_cast<double>(logits[at(0)]);
        for (int64_t c = 1; c < classes; ++c)
          max_logit = std::max(max_logit, static_cast<double>(logits[at(c)]));
        double sum_exp = 0.0;
        for (int64_t c = 0; c < classes; ++c)
          sum_exp += std::exp(static_cast<double>(logits[at(c)]) - max_logit);
        const double log_sum_exp = max_logit + std::log(sum_exp);
        const double weight = class_weights ? static_cast<double>(class_weights[label]) : 1.0;
        // sum_c q_c (lse - z_c) = lse - (1 - e) z_label - e/C sum_c z_c
        double target_logit = static_cast<double>(logits[at(label)]);
        if (label_smoothing > 0) {
          double logit_sum = 0.0;
          for (int64_t c = 0; c < classes; ++c) logit_sum += static_cast<double>(logits[at(c)]);
          target_logit = (1 - label_smoothing) * target_logit + spread * logit_sum;
        }
        loss += weight * (log_sum_exp - target_logit);
        if (diff) {
          const double scale = diff_scale * weight / positions;
          for (int64_t c = 0; c < classes; ++c) {
            const double softmax = std::exp(static_cast<double>(logits[at(c)]) - log_sum_exp);
            const double target = (c == label ? 1.0 - label_smoothing : 0.0) + spread;
            diff[at(c)] = static_cast<T>(scale * (softmax - target));
          }
        }
      }
    return loss / positions;
  }

  void sgd_keras(void* w_v, const void* g_v, void* v_v, size_t count, double lr, double momentum,
                 bool nesterov) override {
    T* w = static_cast<T*>(w_v);
    const T* g = static_cast<const T*>(g_v);
    T* v = static_cast<T*>(v_v);
    for (size_t i = 0; i < count; ++i) {
      const double velocity = momentum * v[i] - lr * g[i];
      v[i] = static_cast<T>(velocity);
      const double step = nesterov ? momentum * velocity - lr * g[i] : velocity;
      w[i] = static_cast<T>(w[i] + step);
    }
  }

  void adam(void* w_v, const void* g_v, void* m_v, void* v_v, size_t count, double lr, double beta1,
            double beta2, double eps, double weight_decay, bool decoupled, int64_t step) override {
    if (step < 1) throw_input("adam: step is 1-based, got " + std::to_string(step));
    T* w = static_cast<T*>(w_v);
    const T* g = static_cast<const T*>(g_v);
    T* m = static_cast<T*>(m_v);
    T* v = static_cast<T*>(v_v);
    const double correction1 = 1.0 - std::pow(beta1, static_cast<double>(step));
    const double correction2 = 1.0 - std::pow(beta2, static_cast<double>(step));
    for (size_t i = 0; i < count; ++i) {
      const double weight = w[i];
      // L2 Adam folds the decay into the gradient (and so into the moments); AdamW does not.
      const double grad = decoupled ? double(g[i]) : g[i] + weight_decay * weight;
      const double m_new = beta1 * m[i] + (1.0 - beta1) * grad;
      const double v_new = beta2 * v[i] + (1.0 - beta2) * grad * grad;
      m[i] = static_cast<T>(m_new);
      v[i] = static_cast<T>(v_new);
      const double m_hat = m_new / correction1;
      const double v_hat = v_new / correction2;
      double update = m_hat / (std::sqrt(v_hat) + eps);
      if (decoupled) update += weight_decay * weight;
      w[i] = static_cast<T>(weight - lr * update);
    }
  }

  void lag_correction(void* grads_v, const void* average_v, void* own_previous_v, void* sent_v,
                      size_t count, double own_scale, bool replace_share) override {
    T* grads = static_cast<T*>(grads_v);
    const T* average = static_cast<const T*>(average_v);
    T* own_previous = static_cast<T*>(own_previous_v);
    T* sent = static_cast<T*>(sent_v);
    for (size_t i = 0; i < count; ++i)
      lag_correct_element(grads, average, own_previous, sent, i, own_scale, replace_share);
  }

  void lars_update(void* w_v, const void* g_v, void* buf_v, size_t count, double lr,
                   double momentum, double grad_scale, double weight_decay) override {
    T* w = static_cast<T*>(w_v);
    const T* g = static_cast<const T*>(g_v);
    T* buf = static_cast<T*>(buf_v);
    for (size_t i = 0; i < count; ++i) {
      const double weight = w[i];
      const double d = grad_scale * (static_cast<double>(g[i]) + weight_decay * weight);
      const double velocity = momentum * static_cast<double>(buf[i]) + d;
      buf[i] = static_cast<T>(velocity);
      w[i] = static_cast<T>(weight - lr * velocity);
    }
  }

  void lamb_direction(const void* w_v, void* g_v, void* m_v, void* v_v, size_t count,
                      double grad_divisor, double beta1, double beta2, double eps,
                      double weight_decay, int64_t step) override {
    if (step < 1) throw_input("lamb: step is 1-based, got " + std::to_string(step));
    if (!(grad_divisor > 0.0))
      throw_input("lamb: the gradient divisor must be positive, got " +
                  std::to_string(grad_divisor));
    const T* w = static_cast<const T*>(w_v);
    T* g = static_cast<T*>(g_v);
    T* m = static_cast<T*>(m_v);
    T* v = static_cast<T*>(v_v);
    // The step's constants in double, rounded once to T; then T's arithmetic, element by element
    // exactly as the onednn backend's lamb_direction_loop.
    const auto correction1 = static_cast<T>(1.0 - std::pow(beta1, static_cast<double>(step)));
    const auto correction2 = static_cast<T>(1.0 - std::pow(beta2, static_cast<double>(step)));
    const auto divisor = static_cast<T>(grad_divisor);
    const auto b1 = static_cast<T>(beta1), b2 = static_cast<T>(beta2);
    const auto epsilon = static_cast<T>(eps), decay = static_cast<T>(weight_decay);
    for (size_t i = 0; i < count; ++i) {
      const T clipped = g[i] / divisor;
      const T m_new = b1 * m[i] + (T(1) - b1) * clipped;
      const T v_new = b2 * v[i] + (T(1) - b2) * clipped * clipped;
      m[i] = m_new;
      v[i] = v_new;
      const T direction = (m_new / correction1) / (std::sqrt(v_new / correction2) + epsilon);
      g[i] = direction + decay * w[i];
    }
  }

  double narrow(const void* x, double scale, void* dst, size_t count, DType to) override {
    require_float16(to, "narrow");
    return narrow_range(static_cast<const T*>(x), static_cast<float>(scale),
                        static_cast<uint16_t*>(dst), 0, count, to);
  }

  void widen(const void* src, DType from, void* dst, size_t count) override {
    require_float16(from, "widen");
    widen_range(static_cast<const uint16_t*>(src), static_cast<T*>(dst), 0, count, from);
  }
};

}  // namespace

std::unique_ptr<VectorOps> make_vector_ops(DType dtype) {
  if (is_half(dtype)) return make_half_vector_ops(dtype);
  require_float_dtype(dtype, "vector ops");
  if (dtype == DType::f64) return std::make_unique<Ops<double>>();
  return std::make_unique<Ops<float>>();
}

}  // namespace crest::reference
