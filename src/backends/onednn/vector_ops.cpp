// f32 flat-buffer operations. Element-wise loops are `omp parallel for simd` (the optimizers'
// updates in update_loops.cpp, compiled per instruction set); arithmetic runs in the type the
// reference backend uses (double, except LAMB's float), so both round the same way and agree to
// the last bit on most elements. Reductions split the range into a fixed number of chunks that
// depends only on the element count, sum each chunk on whichever thread gets it and add the partial
// sums in chunk order: the result is the same for every thread count.
#include "onednn/vector_ops.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "crest/core/error.hpp"
#include "dropout_hash.hpp"
#include "float16_codes.hpp"
#include "half_vector_ops.hpp"
#include "onednn/cross_entropy_loop.hpp"
#include "onednn/update_loops.hpp"
#include "vector_op_checks.hpp"

namespace crest::onednn {

namespace {

// Sums term(i) over [0, count) deterministically (see the file comment). `term` may also write
// per-element outputs (the loss gradients).
template <typename Term>
double chunked_sum(size_t count, Term&& term) {
  const size_t chunks = fixed_chunks(count);
  double partial[kMaxChunks];
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (size_t c = 0; c < chunks; ++c) {
    const size_t lo = count * c / chunks;
    const size_t hi = count * (c + 1) / chunks;
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (size_t i = lo; i < hi; ++i) s += term(i);
    partial[c] = s;
  }
  double total = 0.0;
  for (size_t c = 0; c < chunks; ++c) total += partial[c];
  return total;
}

LambStep checked_lamb_step(double grad_divisor, double beta1, double beta2, double eps,
                           double weight_decay, int64_t step) {
  if (step < 1) throw_input("lamb: step is 1-based, got " + std::to_string(step));
  if (!(grad_divisor > 0.0))
    throw_input("lamb: the gradient divisor must be positive, got " + std::to_string(grad_divisor));
  return LambStep{grad_divisor, beta1, beta2, eps, weight_decay, step};
}

class F32Ops final : public VectorOps {
 public:
  DType dtype() const override { return DType::f32; }

  void fill(void* x, size_t count, double value) override {
    float* p = static_cast<float*>(x);
    const float v = static_cast<float>(value);
#pragma omp parallel for simd schedule(static) if (count >= kParallelMin)
    for (size_t i = 0; i < count; ++i) p[i] = v;
  }

  void copy(const void* src, void* dst, size_t count) override {
    const float* s = static_cast<const float*>(src);
    float* d = static_cast<float*>(dst);
    if (s == d) return;
#pragma omp parallel for simd schedule(static) if (count >= kParallelMin)
    for (size_t i = 0; i < count; ++i) d[i] = s[i];
  }

  void add(const void* a, const void* b, void* dst, size_t count) override {
    const float* x = static_cast<const float*>(a);
    const float* y = static_cast<const float*>(b);
    float* d = static_cast<float*>(dst);
#pragma omp parallel for simd schedule(static) if (count >= kParallelMin)
    for (size_t i = 0; i < count; ++i) d[i] = x[i] + y[i];
  }

  void axpy(double alpha, const void* x, void* y, size_t count) override {
    axpy_loop(alpha, static_cast<const float*>(x), static_cast<float*>(y), count);
  }

  void scale(double alpha, const void* x, void* dst, size_t count) override {
    const float* s = static_cast<const float*>(x);
    float* d = static_cast<float*>(dst);
#pragma omp parallel for simd schedule(static) if (count >= kParallelMin)
    for (size_t i = 0; i < count; ++i) d[i] = static_cast<float>(alpha * static_cast<double>(s[i]));
  }

  double sum_squares(const void* x, size_t count) override {
    return sum_squares_loop(static_cast<const float*>(x), count);
  }

  // The ranges laid end to end are split into fixed chunks as chunked_sum splits one buffer, so a
  // big tensor is shared among the threads and a hundred small ones do not each open a parallel
  // region. A range wholly inside one chunk is summed there; a range cut by chunk boundaries gets
  // a piece from every chunk it crosses, and the pieces are added in chunk order afterwards. The
  // sums thus depend on the ranges only, not on the thread count.
  void range_sum_squares(const void* a_v, const void* b_v, const ElementRange* ranges, size_t n,
                         double* a_sq, double* b_sq) override {
    const float* a = static_cast<const float*>(a_v);
    const float* b = static_cast<const float*>(b_v);
    size_t total = 0;
    for (size_t r = 0; r < n; ++r) {
      total += ranges[r].count;
      a_sq[r] = b_sq[r] = 0.0;
    }
    const size_t chunks = std::clamp<size_t>(total / kChunkMin, 1, kMaxChunks);
    // A chunk cuts at most two ranges: the first it touches (cut on the left, maybe on both
    // sides) and the last (cut on the right only).
    constexpr size_t kNone = SIZE_MAX;
    struct Piece {
      size_t range = kNone;
      double a = 0, b = 0;
    };
    Piece left_cut[kMaxChunks], right_cut[kMaxChunks];
#pragma omp parallel for schedule(static) if (chunks > 1)
    for (size_t c = 0; c < chunks; ++c) {
      const size_t lo = total * c / chunks;
      const size_t hi = total * (c + 1) / chunks;
      // Positions count the ranges' elements end to end; `start` is range r's first.
      size_t r = 0, start = 0;
      while (r < n && start + ranges[r].count <= lo) start += ranges[r++].count;
      for (; r < n && start < hi; start += ranges[r++].count) {
        const size_t from = std::max(lo, start) - start;
        const size_t to = std::min(hi, start + ranges[r].count) - start;
        const float* pa = a + ranges[r].offset;
        const float* pb = b + ranges[r].offset;
        double sa = 0.0, sb = 0.0;
#pragma omp simd reduction(+ : sa, sb)
        for (size_t i = from; i < to; ++i) {
          const double x = pa[i], y = pb[i];
          sa += x * x;
          sb += y * y;
        }
        if (from > 0)
          left_cut[c] = {r, sa, sb};
        else if (to < ranges[r].count)
          right_cut[c] = {r, sa, sb};
        else
          a_sq[r] = sa, b_sq[r] = sb;  // whole: no other chunk touches range r
      }
    }
    for (size_t c = 0; c < chunks; ++c)
      for (const Piece& p : {left_cut[c], right_cut[c]})
        if (p.range != kNone) {
          a_sq[p.range] += p.a;
          b_sq[p.range] += p.b;
        }
  }

  void dropout_at(const void* x, void* dst, size_t count, float p, uint64_t seed,
                  uint64_t first) override {
    if (!(p >= 0.f && p <= 1.f))
      throw_input("dropout: rate must be in [0, 1], got " + std::to_string(p));
    const float* s = static_cast<const float*>(x);
    float* d = static_cast<float*>(dst);
    // p == 1 keeps nothing, so the infinite scale is never used.
    const double keep_scale = p < 1.f ? 1.0 / (1.0 - static_cast<double>(p)) : 0.0;
    const double rate = p;
#pragma omp parallel for simd schedule(static) if (count >= kParallelMin)
    for (size_t i = 0; i < count; ++i) {
      const bool keep = dropout_uniform(seed, first + i) >= rate;
      d[i] = keep ? static_cast<float>(static_cast<double>(s[i]) * keep_scale) : 0.f;
    }
  }

  double mse(const void* pred, const void* target, void* diff, size_t count,
             double diff_scale) override {
    if (count == 0) throw_input("mse: needs at least one element");
    const float* p = static_cast<const float*>(pred);
    const float* t = static_cast<const float*>(target);
    float* g = static_cast<float*>(diff);  // may be null when only the loss is wanted
    const double grad_scale = 2.0 / static_cast<double>(count) * diff_scale;
    double sum;
    if (g != nullptr) {
      sum = chunked_sum(count, [=](size_t i) {
        const double e = static_cast<double>(p[i]) - static_cast<double>(t[i]);
        g[i] = static_cast<float>(grad_scale * e);
        return e * e;
      });
    } else {
      sum = chunked_sum(count, [=](size_t i) {
        const double e = static_cast<double>(p[i]) - static_cast<double>(t[i]);
        return e * e;
      });
    }
    return sum / static_cast<double>(count);
  }

  double softmax_cross_entropy(const void* logits_v, const int32_t* labels,
                               const float* class_weights, double label_smoothing,
                               void* diff_logits, int64_t n, int64_t classes, int64_t spatial,
                               double diff_scale) override {
    check_softmax_cross_entropy_sizes(n, classes, spatial, label_smoothing);
    const auto positions = static_cast<size_t>(n * spatial);
    // Validate labels first: nothing may throw inside the parallel loop.
    size_t first_bad = positions;
#pragma omp parallel for reduction(min : first_bad) schedule(static) if (positions >= kParallelMin)
    for (size_t q = 0; q < positions; ++q)
      if (labels[q] < 0 || labels[q] >= classes) first_bad = std::min(first_bad, q);
    if (first_bad < positions)
      throw_label_outside_classes(labels[first_bad], static_cast<int64_t>(first_bad), spatial,
                                  classes);

    const CrossEntropyProblem problem{static_cast<const float*>(logits_v),
                                      labels,
                                      class_weights,
                                      static_cast<float*>(diff_logits),
                                      n,
                                      classes,
                                      spatial,
                                      diff_scale,
                                      label_smoothing};
    return cross_entropy_loop(problem) / static_cast<double>(positions);
  }

  void sgd_keras(void* w_v, const void* g_v, void* v_v, size_t count, double lr, double momentum,
                 bool nesterov) override {
    sgd_keras_loop(static_cast<float*>(w_v), static_cast<const float*>(g_v),
                   static_cast<float*>(v_v), count, lr, momentum, nesterov);
  }

  void adam(void* w_v, const void* g_v, void* m_v, void* v_v, size_t count, double lr, double beta1,
            double beta2, double eps, double weight_decay, bool decoupled, int64_t step) override {
    if (step < 1) throw_input("adam: step is 1-based, got " + std::to_string(step));
    adam_loop(static_cast<float*>(w_v), static_cast<const float*>(g_v), static_cast<float*>(m_v),
              static_cast<float*>(v_v), count,
              AdamStep{lr, beta1, beta2, eps, weight_decay, decoupled, step});
  }

  void lag_correction(void* grads, const void* average, void* own_previous, void* sent,
                      size_t count, double own_scale, bool replace_share) override {
    lag_correction_loop(static_cast<float*>(grads), static_cast<const float*>(average),
                        static_cast<float*>(own_previous), static_cast<float*>(sent), count,
                        own_scale, replace_share);
  }

  void lars_update(void* w_v, const void* g_v, void* buf_v, size_t count, double lr,
                   double momentum, double grad_scale, double weight_decay) override {
    lars_update_loop(static_cast<float*>(w_v), static_cast<const float*>(g_v),
                     static_cast<float*>(buf_v), count, lr, momentum, grad_scale, weight_decay);
  }

  void lamb_direction(const void* w_v, void* g_v, void* m_v, void* v_v, size_t count,
                      double grad_divisor, double beta1, double beta2, double eps,
                      double weight_decay, int64_t step) override {
    lamb_direction_loop(static_cast<const float*>(w_v), static_cast<float*>(g_v),
                        static_cast<float*>(m_v), static_cast<float*>(v_v), count,
                        checked_lamb_step(grad_divisor, beta1, beta2, eps, weight_decay, step));
  }

  // One pass instead of three over a tensor too large for the cache to keep between them.
  SquareSums lamb_direction_with_norms(const void* w_v, void* g_v, void* m_v, void* v_v,
                                       size_t count, double grad_divisor, double beta1,
                                       double beta2, double eps, double weight_decay,
                                       int64_t step) override {
    return lamb_direction_norms_loop(
        static_cast<const float*>(w_v), static_cast<float*>(g_v), static_cast<float*>(m_v),
        static_cast<float*>(v_v), count,
        checked_lamb_step(grad_divisor, beta1, beta2, eps, weight_decay, step));
  }

  // Fixed chunks as in chunked_sum; the largest magnitude does not depend on the order anyway.
  double narrow(const void* x, double scale, void* dst, size_t count, DType to) override {
    require_float16(to, "narrow");
    const size_t chunks = fixed_chunks(count);
    float largest[kMaxChunks];
#pragma omp parallel for schedule(static) if (chunks > 1)
    for (size_t c = 0; c < chunks; ++c)
      largest[c] = narrow_range(static_cast<const float*>(x), static_cast<float>(scale),
                                static_cast<uint16_t*>(dst), count * c / chunks,
                                count * (c + 1) / chunks, to);
    return *std::max_element(largest, largest + chunks);
  }

  void widen(const void* src, DType from, void* dst, size_t count) override {
    require_float16(from, "widen");
    const size_t chunks = fixed_chunks(count);
#pragma omp parallel for schedule(static) if (chunks > 1)
    for (size_t c = 0; c < chunks; ++c)
      widen_range(static_cast<const uint16_t*>(src), static_cast<float*>(dst), count * c / chunks,
                  count * (c + 1) / chunks, from);
  }
};

}  // namespace

std::unique_ptr<VectorOps> make_vector_ops(DType dtype) {
  if (is_half(dtype)) return make_half_vector_ops(dtype);
  if (dtype != DType::f32)
    throw_usage("the onednn backend's vector ops are f32 only, got " + dtype_name(dtype));
  return std::make_unique<F32Ops>();
}

}  // namespace crest::onednn
