#include "onednn/update_loops.hpp"

#include <algorithm>
#include <cmath>

#include "lag_correction_element.hpp"
#include "onednn/double_lanes.hpp"
#include "widest_vectors.hpp"

namespace crest::onednn {

namespace {

using double_lanes::widened;
using EightDoubles = double_lanes::Doubles;

// Sixteen running sums (two vectors: element i of a 16-element group goes to sum i), added
// pairwise at the end, then the tail in order.
[[gnu::always_inline]] inline double chunk_sum_squares(const float* x, size_t lo, size_t hi) {
  EightDoubles low = {}, high = {};
  size_t i = lo;
  for (; i + 16 <= hi; i += 16) {
    const EightDoubles a = widened(x + i), b = widened(x + i + 8);
    low += a * a;
    high += b * b;
  }
  const EightDoubles pairs = low + high;
  double s = ((pairs[0] + pairs[4]) + (pairs[2] + pairs[6])) +
             ((pairs[1] + pairs[5]) + (pairs[3] + pairs[7]));
  for (; i < hi; ++i) s += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  return s;
}

}  // namespace

namespace {

// The step's constants, computed in double and rounded once, as apex computes them on the host;
// the element-wise arithmetic is float's.
struct LambConstants {
  explicit LambConstants(const LambStep& s)
      : correction1(static_cast<float>(1.0 - std::pow(s.beta1, static_cast<double>(s.step)))),
        correction2(static_cast<float>(1.0 - std::pow(s.beta2, static_cast<double>(s.step)))),
        divisor(static_cast<float>(s.grad_divisor)),
        beta1(static_cast<float>(s.beta1)),
        beta2(static_cast<float>(s.beta2)),
        eps(static_cast<float>(s.eps)),
        decay(static_cast<float>(s.weight_decay)) {}
  float correction1, correction2, divisor, beta1, beta2, eps, decay;
};

[[gnu::always_inline]] inline void lamb_direction_at(const float* w, float* g, float* m, float* v,
                                                     size_t i, const LambConstants& k) {
  const float clipped = g[i] / k.divisor;
  const float m_new = k.beta1 * m[i] + (1.f - k.beta1) * clipped;
  const float v_new = k.beta2 * v[i] + (1.f - k.beta2) * clipped * clipped;
  m[i] = m_new;
  v[i] = v_new;
  const float direction = (m_new / k.correction1) / (std::sqrt(v_new / k.correction2) + k.eps);
  g[i] = direction + k.decay * w[i];
}

struct LambChunk {
  const float* w;
  float *g, *m, *v;
  const LambConstants* k;
  double* w_squares;  // one per chunk
  double* u_squares;
  size_t chunks, count;
};

// Chunk c of the fused pass: the directions in groups of 16, each group's squares added to the
// running sums as soon as it is written (still in L1), in chunk_sum_squares's order; the tail
// likewise. Returns nothing: the chunk's two sums go to their slots.
[[gnu::always_inline]] inline void lamb_chunk(const LambChunk& a, size_t c) {
  const size_t lo = a.count * c / a.chunks, hi = a.count * (c + 1) / a.chunks;
  EightDoubles w_low = {}, w_high = {}, u_low = {}, u_high = {};
  size_t i = lo;
  for (; i + 16 <= hi; i += 16) {
#pragma omp simd
    for (size_t j = i; j < i + 16; ++j) lamb_direction_at(a.w, a.g, a.m, a.v, j, *a.k);
    const EightDoubles w0 = widened(a.w + i), w1 = widened(a.w + i + 8);
    const EightDoubles u0 = widened(a.g + i), u1 = widened(a.g + i + 8);
    w_low += w0 * w0;
    w_high += w1 * w1;
    u_low += u0 * u0;
    u_high += u1 * u1;
  }
  const auto pairwise = [](EightDoubles low, EightDoubles high) CREST_INLINED_LAMBDA {
    const EightDoubles p = low + high;
    return ((p[0] + p[4]) + (p[2] + p[6])) + ((p[1] + p[5]) + (p[3] + p[7]));
  };
  double w_sum = pairwise(w_low, w_high), u_sum = pairwise(u_low, u_high);
  for (; i < hi; ++i) {
    lamb_direction_at(a.w, a.g, a.m, a.v, i, *a.k);
    w_sum += static_cast<double>(a.w[i]) * static_cast<double>(a.w[i]);
    u_sum += static_cast<double>(a.g[i]) * static_cast<double>(a.g[i]);
  }
  a.w_squares[c] = w_sum;
  a.u_squares[c] = u_sum;
}

}  // namespace

namespace {
#define CREST_WIDEST_VECTORS_LOOPS "onednn/update_loops.inc"
#include "widest_vectors_expand.hpp"
}  // namespace

double sum_squares_loop(const float* x, size_t count) {
  return CREST_WIDEST_VECTORS_CALL(sum_squares_loop, x, count);
}

void axpy_loop(double alpha, const float* x, float* y, size_t count) {
  CREST_WIDEST_VECTORS_CALL(axpy_loop, alpha, x, y, count);
}

void lag_correction_loop(float* grads, const float* average, float* own_previous, float* sent,
                         size_t count, double own_scale, bool replace_share) {
  CREST_WIDEST_VECTORS_CALL(lag_correction_loop, grads, average, own_previous, sent, count,
                            own_scale, replace_share);
}

void sgd_keras_loop(float* w, const float* g, float* v, size_t count, double lr, double momentum,
                    bool nesterov) {
  CREST_WIDEST_VECTORS_CALL(sgd_keras_loop, w, g, v, count, lr, momentum, nesterov);
}

void adam_loop(float* w, const float* g, float* m, float* v, size_t count, const AdamStep& s) {
  CREST_WIDEST_VECTORS_CALL(adam_loop, w, g, m, v, count, s);
}

void lars_update_loop(float* w, const float* g, float* buf, size_t count, double lr,
                      double momentum, double grad_scale, double weight_decay) {
  CREST_WIDEST_VECTORS_CALL(lars_update_loop, w, g, buf, count, lr, momentum, grad_scale,
                            weight_decay);
}

void lamb_direction_loop(const float* w, float* g, float* m, float* v, size_t count,
                         const LambStep& s) {
  CREST_WIDEST_VECTORS_CALL(lamb_direction_loop, w, g, m, v, count, s);
}

VectorOps::SquareSums lamb_direction_norms_loop(const float* w, float* g, float* m, float* v,
                                                size_t count, const LambStep& s) {
  return CREST_WIDEST_VECTORS_CALL(lamb_direction_norms_loop, w, g, m, v, count, s);
}

}  // namespace crest::onednn
