// The optimizers' per-step loops over float32 buffers (crest::VectorOps's sgd_keras, adam,
// lars_update, lamb_direction, axpy and sum_squares on the onednn backend). They stream every
// parameter, gradient and moment once per step: 56 M of each for DeepCAM, so they are worth the
// machine's widest vectors. crest's own loops are compiled for the baseline x86-64 (CREST_NATIVE is
// off by default, so one binary runs on every node); these few are also compiled for AVX2 and
// AVX-512, and the widest the CPU has (or CREST_MAX_CPU_ISA allows) runs (widest_vectors.hpp).
// Results are the same from every copy: each element is computed on its own with correctly rounded
// +, -, *, / and sqrt, the one reduction (sum_squares) adds in an order the code fixes, and
// CMakeLists.txt turns off the contraction into fused multiply-adds that would round differently
// where FMA exists.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "crest/backends/kernels.hpp"

namespace crest::onednn {

// Below this many elements a parallel region costs more than it saves (every flat-buffer loop of
// this backend uses it).
constexpr size_t kParallelMin = 1 << 14;

// Reductions split a buffer into a fixed number of chunks that depends only on its length (at
// most kMaxChunks, a stack array; each at least kChunkMin elements), sum each chunk on whichever
// thread gets it and add the chunk sums in order: the same bits for every thread count.
constexpr size_t kMaxChunks = 64;
constexpr size_t kChunkMin = 1 << 12;

// How many chunks a reduction over `count` elements takes.
inline size_t fixed_chunks(size_t count) {
  return std::clamp<size_t>(count / kChunkMin, 1, kMaxChunks);
}

// total = the sum over those chunks of chunk_sum(arg, lo, hi), added in chunk order. A macro, not
// a function: the parallel loop must sit in the per-level loop function that uses it, whose
// target OpenMP's outlined body then inherits (an inlined helper's region would be compiled once,
// for the baseline). chunk_sum should be always_inline.
#define CREST_SUM_OVER_FIXED_CHUNKS(total, count, chunk_sum, arg)                               \
  do {                                                                                          \
    const size_t crest_count_ = (count);                                                        \
    const size_t crest_chunks_ = ::crest::onednn::fixed_chunks(crest_count_);                   \
    double crest_partial_[::crest::onednn::kMaxChunks];                                         \
    _Pragma("omp parallel for schedule(static) if (crest_chunks_ > 1)") for (size_t c = 0;      \
                                                                             c < crest_chunks_; \
                                                                             ++c)               \
        crest_partial_[c] = chunk_sum((arg), crest_count_ * c / crest_chunks_,                  \
                                      crest_count_ * (c + 1) / crest_chunks_);                  \
    (total) = 0.0;                                                                              \
    for (size_t c = 0; c < crest_chunks_; ++c) (total) += crest_partial_[c];                    \
  } while (false)

struct AdamStep {
  double lr, beta1, beta2, eps, weight_decay;
  bool decoupled;
  int64_t step;  // 1-based
};

struct LambStep {
  double grad_divisor, beta1, beta2, eps, weight_decay;
  int64_t step;  // 1-based
};

void axpy_loop(double alpha, const float* x, float* y, size_t count);
void sgd_keras_loop(float* w, const float* g, float* v, size_t count, double lr, double momentum,
                    bool nesterov);
void adam_loop(float* w, const float* g, float* m, float* v, size_t count, const AdamStep& s);
void lars_update_loop(float* w, const float* g, float* buf, size_t count, double lr,
                      double momentum, double grad_scale, double weight_decay);
// VectorOps::lag_correction, one pass over the four buffers.
void lag_correction_loop(float* grads, const float* average, float* own_previous, float* sent,
                         size_t count, double own_scale, bool replace_share);
// The sum of squares in double (the global gradient norm, LAMB's per-tensor norms: three passes
// over every parameter per step). Within a chunk, 16 running sums take every 16th element and are
// added pairwise at the end: an order fixed by the code, not by the vector width, so every copy
// gives the same bits, at memory speed.
double sum_squares_loop(const float* x, size_t count);
// In float32 arithmetic, as apex's FusedLAMB computes float32 parameters (its MATH_T is float).
void lamb_direction_loop(const float* w, float* g, float* m, float* v, size_t count,
                         const LambStep& s);
// lamb_direction_loop, also summing the squares of w and of the new u chunk by chunk as
// sum_squares_loop does (the same chunks, the same order within each): the same bits as the two
// sum_squares_loop calls after it, from one pass over the tensor instead of three. Each group of
// 16 directions is squared while it is still in registers or L1.
VectorOps::SquareSums lamb_direction_norms_loop(const float* w, float* g, float* m, float* v,
                                                size_t count, const LambStep& s);

}  // namespace crest::onednn
