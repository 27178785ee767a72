#include "onednn/update_loops.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "widest_vectors.hpp"

namespace crest::onednn {

namespace {

// Eight doubles and eight floats as one value each (GCC's vector extension): each clone lowers
// them to its widest registers. Only used inside the functions below (always inlined), so no
// call passes them across the baseline's ABI.
#pragma GCC diagnostic ignored "-Wpsabi"
using EightDoubles = double __attribute__((vector_size(8 * sizeof(double))));
using EightFloats = float __attribute__((vector_size(8 * sizeof(float))));

[[gnu::always_inline]] inline EightDoubles widened(const float* p) {
  EightFloats f;
  std::memcpy(&f, p, sizeof f);
  return __builtin_convertvector(f, EightDoubles);
}

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

CREST_WIDEST_VECTORS
double sum_squares_loop(const float* x, size_t count) {
  const size_t chunks = std::clamp<size_t>(count / kChunkMin, 1, kMaxChunks);
  double partial[kMaxChunks];
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (size_t c = 0; c < chunks; ++c)
    partial[c] = chunk_sum_squares(x, count * c / chunks, count * (c + 1) / chunks);
  double total = 0.0;
  for (size_t c = 0; c < chunks; ++c) total += partial[c];
  return total;
}

CREST_WIDEST_VECTORS
void axpy_loop(double alpha, const float* x, float* y, size_t count) {
#pragma omp parallel for simd schedule(static) if (count >= kParallelMin)
  for (size_t i = 0; i < count; ++i)
    y[i] = static_cast<float>(alpha * static_cast<double>(x[i]) + static_cast<double>(y[i]));
}

CREST_WIDEST_VECTORS
void sgd_keras_loop(float* w, const float* g, float* v, size_t count, double lr, double momentum) {
#pragma omp parallel for simd schedule(static) if (count >= kParallelMin)
  for (size_t i = 0; i < count; ++i) {
    const double velocity = momentum * static_cast<double>(v[i]) - lr * static_cast<double>(g[i]);
    v[i] = static_cast<float>(velocity);
    w[i] = static_cast<float>(static_cast<double>(w[i]) + velocity);
  }
}

CREST_WIDEST_VECTORS
void adam_loop(float* w, const float* g, float* m, float* v, size_t count, const AdamStep& s) {
  const double correction1 = 1.0 - std::pow(s.beta1, static_cast<double>(s.step));
  const double correction2 = 1.0 - std::pow(s.beta2, static_cast<double>(s.step));
  // L2 Adam folds the decay into the gradient (and so into the moments); AdamW does not.
  const double l2 = s.decoupled ? 0.0 : s.weight_decay;
  const double decay = s.decoupled ? s.weight_decay : 0.0;
  const double beta1 = s.beta1, beta2 = s.beta2, eps = s.eps, lr = s.lr;
#pragma omp parallel for simd schedule(static) if (count >= kParallelMin)
  for (size_t i = 0; i < count; ++i) {
    const double weight = w[i];
    const double grad = static_cast<double>(g[i]) + l2 * weight;
    const double m_new = beta1 * static_cast<double>(m[i]) + (1.0 - beta1) * grad;
    const double v_new = beta2 * static_cast<double>(v[i]) + (1.0 - beta2) * grad * grad;
    m[i] = static_cast<float>(m_new);
    v[i] = static_cast<float>(v_new);
    const double update =
        (m_new / correction1) / (std::sqrt(v_new / correction2) + eps) + decay * weight;
    w[i] = static_cast<float>(weight - lr * update);
  }
}

CREST_WIDEST_VECTORS
void lars_update_loop(float* w, const float* g, float* buf, size_t count, double lr,
                      double momentum, double grad_scale, double weight_decay) {
#pragma omp parallel for simd schedule(static) if (count >= kParallelMin)
  for (size_t i = 0; i < count; ++i) {
    const double weight = w[i];
    const double d = grad_scale * (static_cast<double>(g[i]) + weight_decay * weight);
    const double velocity = momentum * static_cast<double>(buf[i]) + d;
    buf[i] = static_cast<float>(velocity);
    w[i] = static_cast<float>(weight - lr * velocity);
  }
}

namespace {

// The step's constants, computed in double and rounded once, as apex computes them on the host;
// the element-wise arithmetic is float's.
struct LambConstants {
  float correction1, correction2, divisor, beta1, beta2, eps, decay;
  explicit LambConstants(const LambStep& s)
      : correction1(static_cast<float>(1.0 - std::pow(s.beta1, static_cast<double>(s.step)))),
        correction2(static_cast<float>(1.0 - std::pow(s.beta2, static_cast<double>(s.step)))),
        divisor(static_cast<float>(s.grad_divisor)),
        beta1(static_cast<float>(s.beta1)),
        beta2(static_cast<float>(s.beta2)),
        eps(static_cast<float>(s.eps)),
        decay(static_cast<float>(s.weight_decay)) {}
};

[[gnu::always_inline]] inline void lamb_element(const float* w, float* g, float* m, float* v,
                                                size_t i, const LambConstants& c) {
  const float clipped = g[i] / c.divisor;
  const float m_new = c.beta1 * m[i] + (1.f - c.beta1) * clipped;
  const float v_new = c.beta2 * v[i] + (1.f - c.beta2) * clipped * clipped;
  m[i] = m_new;
  v[i] = v_new;
  const float direction = (m_new / c.correction1) / (std::sqrt(v_new / c.correction2) + c.eps);
  g[i] = direction + c.decay * w[i];
}

// One range's piece [lo, hi) of sum_squares_loop's chunks.
struct Piece {
  size_t range, lo, hi;
};

}  // namespace

CREST_WIDEST_VECTORS
void lamb_direction_loop(const float* w, float* g, float* m, float* v, size_t count,
                         const LambStep& s) {
  const LambConstants c(s);
#pragma omp parallel for simd schedule(static) if (count >= kParallelMin)
  for (size_t i = 0; i < count; ++i) lamb_element(w, g, m, v, i, c);
}

CREST_WIDEST_VECTORS
void lamb_direction_norms_loop(const float* w, float* g, float* m, float* v,
                               const ElementRange* ranges, size_t n, const LambStep& s,
                               double* w_sq, double* u_sq) {
  const LambConstants c(s);
  // Each range cut into the chunks sum_squares_loop would cut it into, so each chunk's sums and
  // their total are that function's bits; a chunk's w and u are still in cache when summed.
  std::vector<Piece> pieces;
  for (size_t r = 0; r < n; ++r) {
    const size_t count = ranges[r].count, at = ranges[r].offset;
    const size_t chunks = std::clamp<size_t>(count / kChunkMin, 1, kMaxChunks);
    for (size_t k = 0; k < chunks; ++k)
      pieces.push_back({r, at + count * k / chunks, at + count * (k + 1) / chunks});
  }
  std::vector<double> piece_w(pieces.size()), piece_u(pieces.size());
  size_t elements = 0;
  for (size_t r = 0; r < n; ++r) elements += ranges[r].count;
    // Pieces differ in size (a chunk of a big tensor, a whole small one): handed out one by one.
#pragma omp parallel for schedule(dynamic) if (elements >= kParallelMin)
  for (size_t k = 0; k < pieces.size(); ++k) {
    const Piece& p = pieces[k];
#pragma omp simd
    for (size_t i = p.lo; i < p.hi; ++i) lamb_element(w, g, m, v, i, c);
    piece_w[k] = chunk_sum_squares(w + p.lo, 0, p.hi - p.lo);
    piece_u[k] = chunk_sum_squares(g + p.lo, 0, p.hi - p.lo);
  }
  for (size_t r = 0; r < n; ++r) w_sq[r] = u_sq[r] = 0.0;
  for (size_t k = 0; k < pieces.size(); ++k) {  // in order: sum_squares_loop's total
    w_sq[pieces[k].range] += piece_w[k];
    u_sq[pieces[k].range] += piece_u[k];
  }
}

}  // namespace crest::onednn
