// CUDA flat-buffer operations (cuda/vector_ops.hpp): fills, BLAS-1, dropout, losses, optimizer
// updates and the 16-bit codes for communication, as kernels over device memory.
//
// Each element is computed with the reference backend's formula (reference/vector_ops.cpp,
// half_vector_ops.cpp), in its order and its precision: double for sums and most optimizer
// arithmetic, T for LAMB's direction, float for the 16-bit element-wise ops. CMakeLists.txt
// compiles this file with --fmad=false, so no product and sum are contracted into a fused
// multiply-add that would round differently, and +, -, *, / and sqrt round correctly (nvcc's
// defaults; not with --use_fast_math): element-wise results equal the reference's to the bit.
// Two exceptions: exp and log (softmax cross-entropy) are CUDA's, within an ulp of the host
// library's; and a NaN that GPU arithmetic produces has the canonical payload (it stays a NaN).
//
// Reductions run a launch fixed by the element count alone: each thread sums a grid-stride slice
// in index order, each block adds its threads' sums in a fixed tree into one partial, and one
// block adds the partials in a fixed order. No floating-point atomics: the same bits every run
// (not the reference's bits: its loops add one element after another).
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "crest/core/error.hpp"
#include "cuda/check.hpp"
#include "cuda/elements.cuh"
#include "cuda/launch.cuh"
#include "cuda/vector_ops.hpp"
#include "float16_codes.hpp"
#include "lag_correction_element.hpp"
#include "vector_op_checks.hpp"

namespace crest::cuda {
namespace {

constexpr size_t kReduceBlocks = 1024;           // partials per reduction: several per SM
constexpr size_t kRangeChunk = size_t{1} << 16;  // range_sum_squares: elements per block
constexpr size_t kPartialBytes = 16;             // the largest reduction value below

size_t ceil_div(size_t count, size_t per) { return count / per + (count % per != 0); }

// ---------------------------------------------------------------------------------------------
// The dropout mask: copies of dropout_hash.hpp's splitmix64_mix and dropout_uniform, whose plain
// inline functions a kernel cannot call. They must stay equal to those, bit for bit, so that
// every backend drops the same elements.

__host__ __device__ uint64_t splitmix64_mix_copy(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

__host__ __device__ double dropout_uniform_copy(uint64_t seed, uint64_t i) {
  constexpr uint64_t kGoldenGamma = 0x9E3779B97F4A7C15ull;
  const uint64_t z = splitmix64_mix_copy(seed) + (i + 1) * kGoldenGamma;
  return static_cast<double>(splitmix64_mix_copy(z) >> 11) * (1.0 / 9007199254740992.0);
}

// And of vector_ops.cpp's dropout_seed.
__host__ __device__ uint64_t dropout_seed_copy(uint64_t run_seed, uint64_t step, uint64_t stream) {
  const uint64_t step_seed =
      (run_seed + 0x9E3779B97F4A7C15ull) * (step * 0xBF58476D1CE4E5B9ull + 1);
  return step_seed ^ (stream * 0x94D049BB133111EBull);
}

// The step counter's advance (DeviceOps::increment_counter): one thread.
struct Increment {
  uint64_t* counter;
  __device__ void operator()(size_t) const { ++*counter; }
};

// A mask's seed: given (dropout_at), or drawn from the step counter in device memory where the
// kernel runs (dropout_at_step), so a captured step replays with the next step's masks.
struct MaskSeed {
  uint64_t seed = 0;
  VectorOps::DropoutSeed at_step;
  __device__ uint64_t value() const {
    return at_step.step ? dropout_seed_copy(at_step.run_seed, *at_step.step, at_step.stream) : seed;
  }
};

// ---------------------------------------------------------------------------------------------
// What reductions carry: aggregates (so they fit a __shared__ array) with an identity and a
// combine; the launch fixes the order of the combines.

struct Sum {
  double total;
  __host__ __device__ static Sum identity() { return {0.0}; }
  __device__ static Sum combine(Sum a, Sum b) { return {a.total + b.total}; }
};

struct SumPair {
  double first, second;
  __host__ __device__ static SumPair identity() { return {0.0, 0.0}; }
  __device__ static SumPair combine(SumPair a, SumPair b) {
    return {a.first + b.first, a.second + b.second};
  }
};

// The largest |v|, NaN skipped as narrow_range's std::max(largest, |v|) skips it: a NaN on the
// right loses the comparison. A running value starts at 0 and so never is a NaN itself.
struct Largest {
  float magnitude;
  __host__ __device__ static Largest identity() { return {0.f}; }
  __device__ static Largest combine(Largest a, Largest b) {
    return a.magnitude < b.magnitude ? b : a;
  }
};

// The cross-entropy's loss sum and, checked in the same pass, the first position whose label is
// outside [0, classes) (ULLONG_MAX: none).
struct LossAndFirstBad {
  double loss;
  unsigned long long first_bad;
  __host__ __device__ static LossAndFirstBad identity() { return {0.0, ULLONG_MAX}; }
  __device__ static LossAndFirstBad combine(LossAndFirstBad a, LossAndFirstBad b) {
    return {a.loss + b.loss, a.first_bad < b.first_bad ? a.first_bad : b.first_bad};
  }
};

// Combines the block's kThreads values in a fixed tree; the result is valid in thread 0 only
// (the others get their own value back, so a block may call this again in a loop).
template <typename V>
__device__ V block_reduce(V value) {
  __shared__ V lanes[kThreads];
  lanes[threadIdx.x] = value;
  __syncthreads();
  for (unsigned stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride)
      lanes[threadIdx.x] = V::combine(lanes[threadIdx.x], lanes[threadIdx.x + stride]);
    __syncthreads();
  }
  return threadIdx.x == 0 ? lanes[0] : value;
}

// ---------------------------------------------------------------------------------------------
// Kernels

template <typename Body>
__global__ void for_each_element(Body body, size_t count) {
  for (size_t i = first_index(); i < count; i += grid_stride()) body(i);
}

// Block b's partial: the combine of term(i) over its threads' grid-stride slices.
template <typename V, typename Term>
__global__ void reduce_to_partials(Term term, size_t count, V* partials) {
  V sum = V::identity();
  for (size_t i = first_index(); i < count; i += grid_stride()) sum = V::combine(sum, term(i));
  const V block = block_reduce(sum);
  if (threadIdx.x == 0) partials[blockIdx.x] = block;
}

// One block: the combine of `count` partials, handed to finish(total) (one thread) to store.
template <typename V, typename Finish>
__global__ void combine_partials(const V* partials, size_t count, Finish finish) {
  V sum = V::identity();
  for (size_t p = threadIdx.x; p < count; p += kThreads) sum = V::combine(sum, partials[p]);
  const V total = block_reduce(sum);
  if (threadIdx.x == 0) finish(total);
}

// What a reduction stores: its value as it is (for the host to fetch), or the doubles a step
// reads back later (VectorOps::*_into): a sum times a factor (a mean's 1/count), and the
// cross-entropy's mean with its first bad position (-1: none).
template <typename V>
struct StoreValue {
  V* result;
  __device__ void operator()(V total) const { *result = total; }
};
struct StoreSumPair {
  double* out;
  __device__ void operator()(SumPair total) const {
    out[0] = total.first;
    out[1] = total.second;
  }
};
struct StoreNothing {
  template <typename V>
  __device__ void operator()(V) const {}
};
struct StoreScaledSum {
  double* out;
  double factor;
  __device__ void operator()(Sum total) const { out[0] = total.total * factor; }
};
struct StoreLossAndFirstBad {
  double* out;
  double factor;
  __device__ void operator()(LossAndFirstBad total) const {
    out[0] = total.loss * factor;
    out[1] = total.first_bad == ULLONG_MAX ? -1.0 : static_cast<double>(total.first_bad);
  }
};

// range_sum_squares's tables: each range cut into chunks of at most kRangeChunk elements.
struct Chunk {
  size_t begin, end;  // elements [begin, end) of one range
};
struct RangeChunks {
  size_t first, count;  // the range's chunks in the chunk table
};

// One block per chunk: the sums of a^2 and b^2 over it.
template <typename T>
__global__ void sum_chunk_squares(const T* a, const T* b, const Chunk* chunks, size_t n_chunks,
                                  SumPair* partials) {
  for (size_t c = blockIdx.x; c < n_chunks; c += gridDim.x) {
    SumPair sum = SumPair::identity();
    for (size_t i = chunks[c].begin + threadIdx.x; i < chunks[c].end; i += kThreads)
      sum = SumPair::combine(sum,
                             {static_cast<double>(a[i]) * a[i], static_cast<double>(b[i]) * b[i]});
    const SumPair block = block_reduce(sum);
    if (threadIdx.x == 0) partials[c] = block;
  }
}

// One thread per range: its chunks' sums, in chunk order, into sums[r] (a) and sums[n + r] (b).
__global__ void sum_range_chunks(const SumPair* partials, const RangeChunks* ranges, size_t n,
                                 double* sums) {
  for (size_t r = first_index(); r < n; r += grid_stride()) {
    SumPair sum = SumPair::identity();
    for (size_t c = ranges[r].first; c < ranges[r].first + ranges[r].count; ++c)
      sum = SumPair::combine(sum, partials[c]);
    sums[r] = sum.first;
    sums[n + r] = sum.second;
  }
}

// ---------------------------------------------------------------------------------------------
// Per-element bodies (for_each_element) and terms (reduce_to_partials) of the f32/f64 ops, each
// the reference loop's body.

template <typename T>
struct Fill {
  T* x;
  T value;
  __device__ void operator()(size_t i) const { x[i] = value; }
};

// x[0] = factor * value[0] (fill_from: a loss's output from its double, on the device).
template <typename T>
struct FillFrom {
  T* x;
  const double* value;
  double factor;
  __device__ void operator()(size_t) const { x[0] = static_cast<T>(factor * value[0]); }
};

// lamb_trust_ratio's rule (kernels.hpp) in double, as the host computes it.
__device__ double lamb_trust_ratio_of(const double* sums) {
  const double w_norm = sqrt(sums[0]), u_norm = sqrt(sums[1]);
  return w_norm != 0 && u_norm != 0 ? w_norm / u_norm : 1.0;
}

// w = w - lr r u with lr the step's and r from the tensor's sums (1 without them), in Axpy's
// arithmetic (the host's axpy(-lr r)).
template <typename T>
struct LambTrustStep {
  T* w;
  const T* u;
  const VectorOps::UpdateStep* at;
  const double* sums;
  __device__ void operator()(size_t i) const {
    const double alpha = -at->lr * (sums ? lamb_trust_ratio_of(sums) : 1.0);
    w[i] = static_cast<T>(alpha * u[i] + w[i]);
  }
};

// flag[0] = 1 where any of values[0, n) is not finite (one thread: n is a handful).
template <typename T>
struct FlagNonfinite {
  const double* values;
  size_t n;
  T* flag;
  __device__ void operator()(size_t) const {
    for (size_t k = 0; k < n; ++k)
      if (!isfinite(values[k])) flag[0] = T(1);
  }
};

// out[i] = x[i] as a double (widen_into: the step's sideband flags, read with the loss).
template <typename T>
struct Widen {
  const T* x;
  double* out;
  __device__ void operator()(size_t i) const { out[i] = static_cast<double>(x[i]); }
};

template <typename T>
struct Add {
  const T* a;
  const T* b;
  T* dst;
  __device__ void operator()(size_t i) const { dst[i] = a[i] + b[i]; }
};

template <typename T>
struct Axpy {
  double alpha;
  const T* x;
  T* y;
  __device__ void operator()(size_t i) const { y[i] = static_cast<T>(alpha * x[i] + y[i]); }
};

template <typename T>
struct Scale {
  double alpha;
  const T* x;
  T* dst;
  __device__ void operator()(size_t i) const { dst[i] = static_cast<T>(alpha * x[i]); }
};

// VectorOps::lag_correction, element i (the host backends' loop body).
template <typename T>
struct LagCorrection {
  T* grads;
  const T* average;
  T* own_previous;
  T* sent;
  double own_scale;
  bool replace_share;
  __device__ void operator()(size_t i) const {
    lag_correct_element(grads, average, own_previous, sent, i, own_scale, replace_share);
  }
};

template <typename T>
struct SquareOf {
  const T* x;
  __device__ Sum operator()(size_t i) const { return {static_cast<double>(x[i]) * x[i]}; }
};

template <typename T>
struct Dropout {
  const T* x;
  T* dst;
  double rate, keep_scale;
  MaskSeed seed;
  uint64_t first;
  __device__ void operator()(size_t i) const {
    const bool keep = dropout_uniform_copy(seed.value(), first + i) >= rate;
    dst[i] = keep ? static_cast<T>(x[i] * keep_scale) : T(0);
  }
};

template <typename T>
struct SquaredError {
  const T* pred;
  const T* target;
  T* diff;  // null: the loss only
  double grad_scale;
  __device__ Sum operator()(size_t i) const {
    const double e = static_cast<double>(pred[i]) - static_cast<double>(target[i]);
    if (diff != nullptr) diff[i] = static_cast<T>(grad_scale * e);
    return {e * e};
  }
};

// mse's gradient alone: diff = grad_scale (pred - target).
template <typename T>
struct SquaredErrorGradient {
  const T* pred;
  const T* target;
  T* diff;
  double grad_scale;
  __device__ void operator()(size_t i) const {
    diff[i] = static_cast<T>(grad_scale *
                             (static_cast<double>(pred[i]) - static_cast<double>(target[i])));
  }
};

// One position q = b * spatial + s of plain [n, classes, spatial] logits: class c at
// (b * classes + c) * spatial + s.
template <typename T>
struct CrossEntropyAt {
  const T* logits;
  const int32_t* labels;
  const float* class_weights;  // null: every weight 1
  T* diff;                     // null: the loss only
  int64_t classes, spatial;
  double positions, diff_scale;
  double label_smoothing;  // e: the target is (1 - e) onehot(label) + e / classes

  __device__ LossAndFirstBad operator()(size_t q) const {
    const int32_t label = labels[q];
    if (label < 0 || label >= classes) return {0.0, q};
    const auto b = static_cast<int64_t>(q) / spatial, s = static_cast<int64_t>(q) % spatial;
    const T* x = logits + b * classes * spatial + s;
    // log-sum-exp shifted by the maximum (std::max's choice between equals) so exp never overflows.
    double max_logit = static_cast<double>(x[0]);
    for (int64_t c = 1; c < classes; ++c) {
      const auto logit = static_cast<double>(x[c * spatial]);
      max_logit = max_logit < logit ? logit : max_logit;
    }
    double sum_exp = 0.0;
    for (int64_t c = 0; c < classes; ++c)
      sum_exp += exp(static_cast<double>(x[c * spatial]) - max_logit);
    const double log_sum_exp = max_logit + log(sum_exp);
    const double weight = class_weights ? static_cast<double>(class_weights[label]) : 1.0;
    double target_logit = static_cast<double>(x[label * spatial]);
    if (label_smoothing > 0) {  // sum_c q_c z_c = (1 - e) z_label + e/C sum_c z_c
      double logit_sum = 0.0;
      for (int64_t c = 0; c < classes; ++c) logit_sum += static_cast<double>(x[c * spatial]);
      target_logit = (1 - label_smoothing) * target_logit +
                     label_smoothing / static_cast<double>(classes) * logit_sum;
    }
    const double loss = weight * (log_sum_exp - target_logit);
    if (diff != nullptr) write_diff(b * classes * spatial + s, x, label, log_sum_exp, weight);
    return {loss, ULLONG_MAX};
  }

  __device__ void write_diff(int64_t first, const T* x, int32_t label, double log_sum_exp,
                             double weight) const {
    const double scale = diff_scale * weight / positions;
    const double spread = label_smoothing / static_cast<double>(classes);
    for (int64_t c = 0; c < classes; ++c) {
      const double softmax = exp(static_cast<double>(x[c * spatial]) - log_sum_exp);
      const double target = (c == label ? 1.0 - label_smoothing : 0.0) + spread;
      diff[first + c * spatial] = static_cast<T>(scale * (softmax - target));
    }
  }
};

template <typename T>
struct SgdKeras {
  T* w;
  const T* g;
  T* v;
  double lr, momentum;
  bool nesterov;
  __device__ void operator()(size_t i) const {
    const double velocity = momentum * v[i] - lr * g[i];
    v[i] = static_cast<T>(velocity);
    const double step = nesterov ? momentum * velocity - lr * g[i] : velocity;
    w[i] = static_cast<T>(w[i] + step);
  }
};

// Adam's step constants; the bias corrections computed once on the host, as the reference does.
struct AdamStep {
  double lr, beta1, beta2, eps, weight_decay, correction1, correction2;
  bool decoupled;
};

template <typename T>
struct Adam {
  T* w;
  const T* g;
  T* m;
  T* v;
  AdamStep k;
  __device__ void operator()(size_t i) const {
    const double weight = w[i];
    // L2 Adam folds the decay into the gradient (and so into the moments); AdamW does not.
    const double grad = k.decoupled ? double(g[i]) : g[i] + k.weight_decay * weight;
    const double m_new = k.beta1 * m[i] + (1.0 - k.beta1) * grad;
    const double v_new = k.beta2 * v[i] + (1.0 - k.beta2) * grad * grad;
    m[i] = static_cast<T>(m_new);
    v[i] = static_cast<T>(v_new);
    const double m_hat = m_new / k.correction1;
    const double v_hat = v_new / k.correction2;
    double update = m_hat / (sqrt(v_hat) + k.eps);
    if (k.decoupled) update += k.weight_decay * weight;
    w[i] = static_cast<T>(weight - k.lr * update);
  }
};

// The update kernels that read the step's rate and count where they run (VectorOps::UpdateStep):
// the bodies above with those values. A bias correction is computed by every thread from the
// count (the host computes it once for the kernels above).
template <typename T>
struct SgdKerasAtStep {
  T* w;
  const T* g;
  T* v;
  const VectorOps::UpdateStep* at;
  double momentum;
  bool nesterov;
  __device__ void operator()(size_t i) const {
    SgdKeras<T>{w, g, v, at->lr, momentum, nesterov}(i);
  }
};

struct AdamSettings {
  double beta1, beta2, eps, weight_decay;
  bool decoupled;
};

template <typename T>
struct AdamAtStep {
  T* w;
  const T* g;
  T* m;
  T* v;
  AdamSettings s;
  const VectorOps::UpdateStep* at;
  __device__ void operator()(size_t i) const {
    const double step = static_cast<double>(at->step);
    const AdamStep k{at->lr,
                     s.beta1,
                     s.beta2,
                     s.eps,
                     s.weight_decay,
                     1.0 - pow(s.beta1, step),
                     1.0 - pow(s.beta2, step),
                     s.decoupled};
    Adam<T>{w, g, m, v, k}(i);
  }
};

template <typename T>
struct LarsUpdate {
  T* w;
  const T* g;
  T* buf;
  double lr, momentum, grad_scale, weight_decay;
  __device__ void operator()(size_t i) const {
    const double weight = w[i];
    const double d = grad_scale * (static_cast<double>(g[i]) + weight_decay * weight);
    const double velocity = momentum * static_cast<double>(buf[i]) + d;
    buf[i] = static_cast<T>(velocity);
    w[i] = static_cast<T>(weight - lr * velocity);
  }
};

// trust_ratio (kernels.hpp) of a tensor's norms from their sums of squares in device memory, in
// double and in the host's order of operations, every product and sum rounded on its own (no
// fused multiply-add): the host's ratio to the bit.
struct TrustRatioOnDevice {
  const double* w_sq;
  const double* g_sq;
  double coefficient, weight_decay, eps;
  __device__ bool either_zero() const { return *w_sq == 0 || *g_sq == 0; }
  __device__ double operator()() const {
    const double w = sqrt(*w_sq), g = sqrt(*g_sq);
    if (w == 0 || g == 0) return 1.0;
    return __ddiv_rn(__dmul_rn(coefficient, w),
                     __dadd_rn(__dadd_rn(g, __dmul_rn(weight_decay, w)), eps));
  }
};

TrustRatioOnDevice on_device(const VectorOps::TrustRatioAt& r) {
  return {r.w_sq, r.g_sq, r.coefficient, r.weight_decay, r.eps};
}

// LARS's updates with the ratio computed where they run: LarsUpdate's and (Keras form) Axpy's then
// SgdKeras's bodies, element by element as the host's passes compute them.
template <typename T>
struct LarsTrustUpdate {
  T* w;
  const T* g;
  T* buf;
  const VectorOps::UpdateStep* at;
  double momentum;
  TrustRatioOnDevice ratio;
  __device__ void operator()(size_t i) const {
    LarsUpdate<T>{w, g, buf, at->lr, momentum, ratio(), ratio.weight_decay}(i);
  }
};

// LarsUpdate at the step's rate (an excluded tensor's: ratio 1, no decay).
template <typename T>
struct LarsUpdateAtStep {
  T* w;
  const T* g;
  T* buf;
  const VectorOps::UpdateStep* at;
  double momentum, grad_scale, weight_decay;
  __device__ void operator()(size_t i) const {
    LarsUpdate<T>{w, g, buf, at->lr, momentum, grad_scale, weight_decay}(i);
  }
};

template <typename T>
struct SgdKerasTrustUpdate {
  T* w;
  T* g;
  T* v;
  const VectorOps::UpdateStep* at;
  double momentum;
  TrustRatioOnDevice ratio;
  __device__ void operator()(size_t i) const {
    if (ratio.weight_decay != 0) Axpy<T>{ratio.weight_decay, w, g}(i);
    SgdKeras<T>{w, g, v, __dmul_rn(at->lr, ratio()), momentum, false}(i);
  }
};

// LARC's rescaling (apex): g = a (g + wd w) where neither norm is 0, a clipped to min(a / lr, 1)
// in the host's form (std::min: a NaN ratio stays NaN).
template <typename T>
struct LarcTrustRescale {
  T* g;
  const T* w;
  TrustRatioOnDevice ratio;
  bool clip;
  const VectorOps::UpdateStep* at;
  __device__ void operator()(size_t i) const {
    if (ratio.either_zero()) return;
    double a = ratio();
    if (clip) {
      const double over_lr = a / at->lr;
      a = 1.0 < over_lr ? 1.0 : over_lr;
    }
    if (ratio.weight_decay != 0) Axpy<T>{ratio.weight_decay, w, g}(i);
    Scale<T>{a, g, g}(i);
  }
};

// LAMB's step constants in double, rounded once to T (the reference's, then T's arithmetic).
template <typename T>
struct LambConstants {
  T correction1, correction2, divisor, b1, b2, epsilon, decay;
};

// Element i of lamb_direction in T's arithmetic; returns the direction u it writes over g.
template <typename T>
__device__ T lamb_direction_at(const LambConstants<T>& k, const T* w, T* g, T* m, T* v, size_t i) {
  const T clipped = g[i] / k.divisor;
  const T m_new = k.b1 * m[i] + (T(1) - k.b1) * clipped;
  const T v_new = k.b2 * v[i] + (T(1) - k.b2) * clipped * clipped;
  m[i] = m_new;
  v[i] = v_new;
  const T direction = (m_new / k.correction1) / (sqrt(v_new / k.correction2) + k.epsilon);
  const T u = direction + k.decay * w[i];
  g[i] = u;
  return u;
}

// LAMB's settings, and its constants at a step read where the kernel runs.
struct LambSettings {
  double beta1, beta2, eps, weight_decay;
};

template <typename T>
__device__ LambConstants<T> lamb_constants_at(const LambSettings& s,
                                              const VectorOps::UpdateStep& at) {
  const double step = static_cast<double>(at.step);
  return {static_cast<T>(1.0 - pow(s.beta1, step)),
          static_cast<T>(1.0 - pow(s.beta2, step)),
          static_cast<T>(at.grad_divisor),
          static_cast<T>(s.beta1),
          static_cast<T>(s.beta2),
          static_cast<T>(s.eps),
          static_cast<T>(s.weight_decay)};
}

template <typename T>
struct LambDirection {
  LambConstants<T> k;
  const T* w;
  T* g;
  T* m;
  T* v;
  __device__ void operator()(size_t i) const { lamb_direction_at(k, w, g, m, v, i); }
};

// lamb_direction with the squares of w and u as SquareOf would give them: reduced by the same
// launch, the sums equal sum_squares's to the bit.
template <typename T>
struct LambDirectionSquares {
  LambConstants<T> k;
  const T* w;
  T* g;
  T* m;
  T* v;
  __device__ SumPair operator()(size_t i) const {
    const T u = lamb_direction_at(k, w, g, m, v, i);
    return {static_cast<double>(w[i]) * w[i], static_cast<double>(u) * u};
  }
};

template <typename T>
struct LambDirectionAtStep {
  LambSettings s;
  const VectorOps::UpdateStep* at;
  const T* w;
  T* g;
  T* m;
  T* v;
  __device__ void operator()(size_t i) const {
    lamb_direction_at(lamb_constants_at<T>(s, *at), w, g, m, v, i);
  }
};

template <typename T>
struct LambDirectionSquaresAtStep {
  LambSettings s;
  const VectorOps::UpdateStep* at;
  const T* w;
  T* g;
  T* m;
  T* v;
  __device__ SumPair operator()(size_t i) const {
    return LambDirectionSquares<T>{lamb_constants_at<T>(s, *at), w, g, m, v}(i);
  }
};

// narrow_range's body: v = float(x) * scale, coded; returns |v| for the largest.
template <typename T, typename Codes>
struct NarrowAt {
  const T* x;
  float scale;
  uint16_t* dst;
  __device__ Largest operator()(size_t i) const {
    const float v = static_cast<float>(x[i]) * scale;
    dst[i] = Codes::store(v);
    return {fabsf(v)};
  }
};

template <typename T, typename Codes>
struct WidenAt {
  const uint16_t* src;
  T* dst;
  __device__ void operator()(size_t i) const { dst[i] = static_cast<T>(Codes::load(src[i])); }
};

// ---------------------------------------------------------------------------------------------
// Bodies of the 16-bit ops: widened to float, computed as the float32 ops compute, rounded back.

template <typename Codes>
struct HalfAdd {
  const uint16_t* a;
  const uint16_t* b;
  uint16_t* dst;
  __device__ void operator()(size_t i) const {
    dst[i] = Codes::store(Codes::load(a[i]) + Codes::load(b[i]));
  }
};

template <typename Codes>
struct HalfAxpy {
  double alpha;
  const uint16_t* x;
  uint16_t* y;
  __device__ void operator()(size_t i) const {
    y[i] = Codes::store(static_cast<float>(alpha * static_cast<double>(Codes::load(x[i])) +
                                           static_cast<double>(Codes::load(y[i]))));
  }
};

template <typename Codes>
struct HalfScale {
  double alpha;
  const uint16_t* x;
  uint16_t* dst;
  __device__ void operator()(size_t i) const {
    dst[i] = Codes::store(static_cast<float>(alpha * static_cast<double>(Codes::load(x[i]))));
  }
};

template <typename Codes>
struct HalfSquareOf {
  const uint16_t* x;
  __device__ Sum operator()(size_t i) const {
    const double v = Codes::load(x[i]);
    return {v * v};
  }
};

template <typename Codes>
struct HalfDropout {
  const uint16_t* x;
  uint16_t* dst;
  double rate, keep_scale;
  MaskSeed seed;
  uint64_t first;
  __device__ void operator()(size_t i) const {
    const bool keep = dropout_uniform_copy(seed.value(), first + i) >= rate;
    dst[i] = Codes::store(
        keep ? static_cast<float>(static_cast<double>(Codes::load(x[i])) * keep_scale) : 0.f);
  }
};

// ---------------------------------------------------------------------------------------------
// Host side

// Device memory owned by an ops object, grown on demand and never shrunk.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  // Queued kernels may still use the memory: wait for the device (not the stream, which may be
  // destroyed already; cudaFree only "may" wait). Errors ignored: a destructor must not throw,
  // and at exit the context may be gone already.
  ~DeviceBuffer() {
    if (data_ == nullptr) return;
    static_cast<void>(cudaDeviceSynchronize());
    static_cast<void>(cudaFree(data_));
  }

  // At least `bytes`. Growing first waits for `stream`: queued kernels may still use the memory.
  void* reserve(size_t bytes, cudaStream_t stream) {
    if (bytes <= bytes_) return data_;
    if (data_ != nullptr) {
      CREST_CUDA(cudaStreamSynchronize(stream));
      CREST_CUDA(cudaFree(data_));
      data_ = nullptr;
      bytes_ = 0;
    }
    CREST_CUDA(cudaMalloc(&data_, bytes));
    bytes_ = bytes;
    return data_;
  }
  void* data() const { return data_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// The dropout rate check and keep scale both ops families share with the reference.
double dropout_keep_scale(float p) {
  if (!(p >= 0.f && p <= 1.f))
    throw_input("dropout: rate must be in [0, 1], got " + std::to_string(p));
  // p == 1 keeps nothing (u < 1 always), so the infinite scale is never used.
  return p < 1.f ? 1.0 / (1.0 - static_cast<double>(p)) : 0.0;
}

// What the f32/f64 and 16-bit ops share: the stream, launches, reductions and their scratch.
class DeviceOps : public VectorOps {
 public:
  explicit DeviceOps(cudaStream_t stream) : stream_(stream) {
    partials_ = scratch_.reserve((kReduceBlocks + 1) * kPartialBytes, stream_);
  }
  ~DeviceOps() override = default;  // the buffers wait for queued work (see DeviceBuffer)
  DeviceOps(const DeviceOps&) = delete;
  DeviceOps& operator=(const DeviceOps&) = delete;

  void set_counter(uint64_t* counter, uint64_t value) override {
    for_each(1, Fill<uint64_t>{counter, value});
  }
  void increment_counter(uint64_t* counter) override { for_each(1, Increment{counter}); }

 protected:
  template <typename Body>
  void for_each(size_t count, const Body& body) const {
    if (count == 0) return;
    const size_t blocks = std::min(ceil_div(count, kThreads), kMaxBlocks);
    for_each_element<<<static_cast<unsigned>(blocks), kThreads, 0, stream_>>>(body, count);
    CREST_CUDA_LAUNCHED();
  }

  // The combine of term(i) over [0, count), count > 0; waits for the stream.
  template <typename V, typename Term>
  V reduce(size_t count, const Term& term) {
    V* result = reinterpret_cast<V*>(static_cast<char*>(partials_) + kReduceBlocks * kPartialBytes);
    reduce_into<V>(count, term, StoreValue<V>{result});
    return fetch(result);
  }

  // The same combine, stored by finish on the device: queued, nothing waits.
  template <typename V, typename Term, typename Finish>
  void reduce_into(size_t count, const Term& term, const Finish& finish) {
    static_assert(sizeof(V) <= kPartialBytes && alignof(V) <= kPartialBytes);
    const size_t blocks = std::min(ceil_div(count, kThreads), kReduceBlocks);
    V* partials = static_cast<V*>(partials_);
    reduce_to_partials<V>
        <<<static_cast<unsigned>(blocks), kThreads, 0, stream_>>>(term, count, partials);
    CREST_CUDA_LAUNCHED();
    combine_partials<V><<<1, kThreads, 0, stream_>>>(partials, blocks, finish);
    CREST_CUDA_LAUNCHED();
  }

  // One value from device memory, after the work queued before it.
  template <typename V>
  V fetch(const V* device_value) const {
    V value;
    CREST_CUDA(
        cudaMemcpyAsync(&value, device_value, sizeof value, cudaMemcpyDeviceToHost, stream_));
    CREST_CUDA(cudaStreamSynchronize(stream_));
    return value;
  }

  void copy_bytes(const void* src, void* dst, size_t bytes) const {
    if (src == dst || bytes == 0) return;
    CREST_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
  }

  cudaStream_t stream_;

 private:
  DeviceBuffer scratch_;
  void* partials_ = nullptr;  // kReduceBlocks partials, then the result
};

// range_sum_squares: every range cut into chunks of kRangeChunk elements, one block per chunk,
// then each range's chunk sums added in chunk order. The tables are built on the host (the
// ranges are a host array) and uploaded when the ranges change (an optimizer's are the same
// every step); the sums stay in device memory (run_into) or come back into host arrays (run).
class RangeSquares {
 public:
  // sums (device memory): the n sums of a^2, then the n sums of b^2.
  template <typename T>
  void run_into(const T* a, const T* b, const ElementRange* ranges, size_t n, double* sums,
                cudaStream_t stream) {
    if (n == 0) return;
    const Chunk* chunk_table = tables_for(ranges, n, stream);
    if (chunks_.empty()) {  // every range empty
      CREST_CUDA(cudaMemsetAsync(sums, 0, 2 * n * sizeof(double), stream));
      return;
    }
    const auto* range_table = reinterpret_cast<const RangeChunks*>(chunk_table + chunks_.size());
    auto* partials =
        static_cast<SumPair*>(partials_device_.reserve(chunks_.size() * sizeof(SumPair), stream));
    const size_t chunk_blocks = std::min(chunks_.size(), kMaxBlocks);
    sum_chunk_squares<<<static_cast<unsigned>(chunk_blocks), kThreads, 0, stream>>>(
        a, b, chunk_table, chunks_.size(), partials);
    CREST_CUDA_LAUNCHED();
    const size_t range_blocks = std::min(ceil_div(n, kThreads), kMaxBlocks);
    sum_range_chunks<<<static_cast<unsigned>(range_blocks), kThreads, 0, stream>>>(
        partials, range_table, n, sums);
    CREST_CUDA_LAUNCHED();
  }

  template <typename T>
  void run(const T* a, const T* b, const ElementRange* ranges, size_t n, double* a_sq, double* b_sq,
           cudaStream_t stream) {
    if (n == 0) return;
    auto* sums = static_cast<double*>(sums_device_.reserve(2 * n * sizeof(double), stream));
    run_into(a, b, ranges, n, sums, stream);
    sums_host_.resize(2 * n);
    CREST_CUDA(cudaMemcpyAsync(sums_host_.data(), sums, 2 * n * sizeof(double),
                               cudaMemcpyDeviceToHost, stream));
    CREST_CUDA(cudaStreamSynchronize(stream));
    std::copy_n(sums_host_.data(), n, a_sq);
    std::copy_n(sums_host_.data() + n, n, b_sq);
  }

 private:
  // The device tables for `ranges`: uploaded again only when they differ from the last ones.
  const Chunk* tables_for(const ElementRange* ranges, size_t n, cudaStream_t stream) {
    const bool same =
        uploaded_.size() == n && std::equal(ranges, ranges + n, uploaded_.begin(),
                                            [](const ElementRange& x, const ElementRange& y) {
                                              return x.offset == y.offset && x.count == y.count;
                                            });
    if (!same) {
      plan(ranges, n);
      upload(stream);
      uploaded_.assign(ranges, ranges + n);
    }
    return static_cast<const Chunk*>(tables_device_.data());
  }

  void plan(const ElementRange* ranges, size_t n) {
    chunks_.clear();
    range_chunks_.assign(n, RangeChunks{0, 0});
    for (size_t r = 0; r < n; ++r) {
      range_chunks_[r].first = chunks_.size();
      const size_t end = ranges[r].offset + ranges[r].count;
      for (size_t begin = ranges[r].offset; begin < end; begin += kRangeChunk)
        chunks_.push_back({begin, std::min(begin + kRangeChunk, end)});
      range_chunks_[r].count = chunks_.size() - range_chunks_[r].first;
    }
  }

  // The chunk table, then the range table (both 16-byte records), in one device buffer. The
  // copies from pageable memory have read the host vectors when they return.
  void upload(cudaStream_t stream) {
    if (chunks_.empty()) return;
    static_assert(sizeof(Chunk) == sizeof(RangeChunks) && alignof(Chunk) == alignof(RangeChunks));
    const size_t chunk_bytes = chunks_.size() * sizeof(Chunk);
    const size_t range_bytes = range_chunks_.size() * sizeof(RangeChunks);
    auto* tables = static_cast<char*>(tables_device_.reserve(chunk_bytes + range_bytes, stream));
    CREST_CUDA(
        cudaMemcpyAsync(tables, chunks_.data(), chunk_bytes, cudaMemcpyHostToDevice, stream));
    CREST_CUDA(cudaMemcpyAsync(tables + chunk_bytes, range_chunks_.data(), range_bytes,
                               cudaMemcpyHostToDevice, stream));
  }

  std::vector<Chunk> chunks_;
  std::vector<RangeChunks> range_chunks_;
  std::vector<ElementRange> uploaded_;  // the ranges the device tables were made for
  std::vector<double> sums_host_;
  DeviceBuffer tables_device_;    // chunks_ then range_chunks_
  DeviceBuffer partials_device_;  // one SumPair per chunk
  DeviceBuffer sums_device_;      // run's sums before they come back
};

template <typename T>
LambConstants<T> lamb_constants(double grad_divisor, double beta1, double beta2, double eps,
                                double weight_decay, int64_t step) {
  if (step < 1) throw_input("lamb: step is 1-based, got " + std::to_string(step));
  if (!(grad_divisor > 0.0))
    throw_input("lamb: the gradient divisor must be positive, got " + std::to_string(grad_divisor));
  return {static_cast<T>(1.0 - std::pow(beta1, static_cast<double>(step))),
          static_cast<T>(1.0 - std::pow(beta2, static_cast<double>(step))),
          static_cast<T>(grad_divisor),
          static_cast<T>(beta1),
          static_cast<T>(beta2),
          static_cast<T>(eps),
          static_cast<T>(weight_decay)};
}

// The f32 and f64 ops: the reference's full set.
template <typename T>
class Ops final : public DeviceOps {
 public:
  using DeviceOps::DeviceOps;
  DType dtype() const override { return dtype_of<T>::value; }

  void fill(void* x, size_t count, double value) override {
    for_each(count, Fill<T>{static_cast<T*>(x), static_cast<T>(value)});
  }

  void copy(const void* src, void* dst, size_t count) override {
    copy_bytes(src, dst, count * sizeof(T));
  }

  void add(const void* a, const void* b, void* dst, size_t count) override {
    for_each(count,
             Add<T>{static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(dst)});
  }

  void axpy(double alpha, const void* x, void* y, size_t count) override {
    for_each(count, Axpy<T>{alpha, static_cast<const T*>(x), static_cast<T*>(y)});
  }

  void scale(double alpha, const void* x, void* dst, size_t count) override {
    for_each(count, Scale<T>{alpha, static_cast<const T*>(x), static_cast<T*>(dst)});
  }

  void lag_correction(void* grads, const void* average, void* own_previous, void* sent,
                      size_t count, double own_scale, bool replace_share) override {
    for_each(count, LagCorrection<T>{static_cast<T*>(grads), static_cast<const T*>(average),
                                     static_cast<T*>(own_previous), static_cast<T*>(sent),
                                     own_scale, replace_share});
  }

  double sum_squares(const void* x, size_t count) override {
    if (count == 0) return 0.0;
    return reduce<Sum>(count, SquareOf<T>{static_cast<const T*>(x)}).total;
  }

  void sum_squares_into(const void* x, size_t count, double* out) override {
    if (count == 0) return for_each(1, Fill<double>{out, 0.0});
    reduce_into<Sum>(count, SquareOf<T>{static_cast<const T*>(x)}, StoreScaledSum{out, 1.0});
  }

  void range_sum_squares(const void* a, const void* b, const ElementRange* ranges, size_t n,
                         double* a_sq, double* b_sq) override {
    range_squares_.run(static_cast<const T*>(a), static_cast<const T*>(b), ranges, n, a_sq, b_sq,
                       stream_);
  }

  void dropout_at(const void* x, void* dst, size_t count, float p, uint64_t seed,
                  uint64_t first) override {
    drop(x, dst, count, p, MaskSeed{seed, {}}, first);
  }
  void dropout_at_step(const void* x, void* dst, size_t count, float p, const DropoutSeed& s,
                       uint64_t first) override {
    drop(x, dst, count, p, MaskSeed{0, s}, first);
  }

  double mse(const void* pred, const void* target, void* diff, size_t count,
             double diff_scale) override {
    if (count == 0) throw_input("mse: needs at least one element");
    const double grad_scale = 2.0 / static_cast<double>(count) * diff_scale;
    const SquaredError<T> term{static_cast<const T*>(pred), static_cast<const T*>(target),
                               static_cast<T*>(diff), grad_scale};
    return reduce<Sum>(count, term).total / static_cast<double>(count);
  }

  double softmax_cross_entropy(const void* logits, const int32_t* labels,
                               const float* class_weights, double label_smoothing,
                               void* diff_logits, int64_t n, int64_t classes, int64_t spatial,
                               double diff_scale) override {
    check_softmax_cross_entropy_sizes(n, classes, spatial, label_smoothing);
    const auto positions = static_cast<size_t>(n * spatial);
    const CrossEntropyAt<T> term{static_cast<const T*>(logits),    labels,     class_weights,
                                 static_cast<T*>(diff_logits),     classes,    spatial,
                                 static_cast<double>(n * spatial), diff_scale, label_smoothing};
    const LossAndFirstBad sums = reduce<LossAndFirstBad>(positions, term);
    if (sums.first_bad < positions) throw_bad_label(labels, sums.first_bad, classes, spatial);
    return sums.loss / static_cast<double>(positions);
  }

  void mse_into(const void* pred, const void* target, size_t count, double* out) override {
    if (count == 0) throw_input("mse: needs at least one element");
    const SquaredError<T> term{static_cast<const T*>(pred), static_cast<const T*>(target), nullptr,
                               0.0};
    reduce_into<Sum>(count, term, StoreScaledSum{out, 1.0 / static_cast<double>(count)});
  }

  // A bad label cannot throw from the pass: its position goes to out[1] (Layer::loss_from).
  void softmax_cross_entropy_into(const void* logits, const int32_t* labels,
                                  const float* class_weights, double label_smoothing, int64_t n,
                                  int64_t classes, int64_t spatial, double* out) override {
    check_softmax_cross_entropy_sizes(n, classes, spatial, label_smoothing);
    const auto positions = static_cast<size_t>(n * spatial);
    const CrossEntropyAt<T> term{
        static_cast<const T*>(logits),    labels, class_weights,  nullptr, classes, spatial,
        static_cast<double>(n * spatial), 1.0,    label_smoothing};
    reduce_into<LossAndFirstBad>(positions, term,
                                 StoreLossAndFirstBad{out, 1.0 / static_cast<double>(positions)});
  }

  void mse_gradient(const void* pred, const void* target, void* diff, size_t count,
                    double diff_scale) override {
    if (count == 0) throw_input("mse: needs at least one element");
    const double grad_scale = 2.0 / static_cast<double>(count) * diff_scale;
    for_each(count,
             SquaredErrorGradient<T>{static_cast<const T*>(pred), static_cast<const T*>(target),
                                     static_cast<T*>(diff), grad_scale});
  }

  // The same pass as the loss's (the gradient needs each position's softmax), its sums dropped:
  // a bad label was named when the forward's loss was read.
  void softmax_cross_entropy_gradient(const void* logits, const int32_t* labels,
                                      const float* class_weights, double label_smoothing,
                                      void* diff_logits, int64_t n, int64_t classes,
                                      int64_t spatial, double diff_scale) override {
    check_softmax_cross_entropy_sizes(n, classes, spatial, label_smoothing);
    const auto positions = static_cast<size_t>(n * spatial);
    const CrossEntropyAt<T> term{static_cast<const T*>(logits),    labels,     class_weights,
                                 static_cast<T*>(diff_logits),     classes,    spatial,
                                 static_cast<double>(n * spatial), diff_scale, label_smoothing};
    reduce_into<LossAndFirstBad>(positions, term, StoreNothing{});
  }

  void fill_from(void* x, const double* value, double factor) override {
    for_each(1, FillFrom<T>{static_cast<T*>(x), value, factor});
  }

  void flag_nonfinite(const double* values, size_t n, void* flag) override {
    if (n > 0) for_each(1, FlagNonfinite<T>{values, n, static_cast<T*>(flag)});
  }

  void widen_into(const void* x, size_t n, double* out) override {
    for_each(n, Widen<T>{static_cast<const T*>(x), out});
  }

  void range_sum_squares_into(const void* a, const void* b, const ElementRange* ranges, size_t n,
                              double* sums) override {
    range_squares_.run_into(static_cast<const T*>(a), static_cast<const T*>(b), ranges, n, sums,
                            stream_);
  }

  void lars_trust_update(void* w, const void* g, void* buf, size_t count, const UpdateStep* at,
                         double momentum, const TrustRatioAt& ratio) override {
    for_each(count, LarsTrustUpdate<T>{static_cast<T*>(w), static_cast<const T*>(g),
                                       static_cast<T*>(buf), at, momentum, on_device(ratio)});
  }

  void sgd_keras_trust_update(void* w, void* g, void* v, size_t count, const UpdateStep* at,
                              double momentum, const TrustRatioAt& ratio) override {
    for_each(count, SgdKerasTrustUpdate<T>{static_cast<T*>(w), static_cast<T*>(g),
                                           static_cast<T*>(v), at, momentum, on_device(ratio)});
  }

  void larc_trust_rescale(void* g, const void* w, size_t count, const TrustRatioAt& ratio,
                          bool clip, const UpdateStep* at) override {
    for_each(count, LarcTrustRescale<T>{static_cast<T*>(g), static_cast<const T*>(w),
                                        on_device(ratio), clip, at});
  }

  void sgd_keras_at_step(void* w, const void* g, void* v, size_t count, const UpdateStep* at,
                         double momentum, bool nesterov) override {
    for_each(count, SgdKerasAtStep<T>{static_cast<T*>(w), static_cast<const T*>(g),
                                      static_cast<T*>(v), at, momentum, nesterov});
  }

  void adam_at_step(void* w, const void* g, void* m, void* v, size_t count, const UpdateStep* at,
                    double beta1, double beta2, double eps, double weight_decay,
                    bool decoupled) override {
    const AdamSettings settings{beta1, beta2, eps, weight_decay, decoupled};
    for_each(count, AdamAtStep<T>{static_cast<T*>(w), static_cast<const T*>(g), static_cast<T*>(m),
                                  static_cast<T*>(v), settings, at});
  }

  void lars_update_at_step(void* w, const void* g, void* buf, size_t count, const UpdateStep* at,
                           double momentum, double grad_scale, double weight_decay) override {
    for_each(count,
             LarsUpdateAtStep<T>{static_cast<T*>(w), static_cast<const T*>(g), static_cast<T*>(buf),
                                 at, momentum, grad_scale, weight_decay});
  }

  void lamb_direction_at_step(const void* w, void* g, void* m, void* v, size_t count,
                              const UpdateStep* at, double beta1, double beta2, double eps,
                              double weight_decay) override {
    for_each(count, LambDirectionAtStep<T>{{beta1, beta2, eps, weight_decay},
                                           at,
                                           static_cast<const T*>(w),
                                           static_cast<T*>(g),
                                           static_cast<T*>(m),
                                           static_cast<T*>(v)});
  }

  void sgd_keras(void* w, const void* g, void* v, size_t count, double lr, double momentum,
                 bool nesterov) override {
    for_each(count, SgdKeras<T>{static_cast<T*>(w), static_cast<const T*>(g), static_cast<T*>(v),
                                lr, momentum, nesterov});
  }

  void adam(void* w, const void* g, void* m, void* v, size_t count, double lr, double beta1,
            double beta2, double eps, double weight_decay, bool decoupled, int64_t step) override {
    if (step < 1) throw_input("adam: step is 1-based, got " + std::to_string(step));
    const AdamStep k{lr,
                     beta1,
                     beta2,
                     eps,
                     weight_decay,
                     1.0 - std::pow(beta1, static_cast<double>(step)),
                     1.0 - std::pow(beta2, static_cast<double>(step)),
                     decoupled};
    for_each(count, Adam<T>{static_cast<T*>(w), static_cast<const T*>(g), static_cast<T*>(m),
                            static_cast<T*>(v), k});
  }

  void lars_update(void* w, const void* g, void* buf, size_t count, double lr, double momentum,
                   double grad_scale, double weight_decay) override {
    for_each(count, LarsUpdate<T>{static_cast<T*>(w), static_cast<const T*>(g),
                                  static_cast<T*>(buf), lr, momentum, grad_scale, weight_decay});
  }

  void lamb_direction(const void* w, void* g, void* m, void* v, size_t count, double grad_divisor,
                      double beta1, double beta2, double eps, double weight_decay,
                      int64_t step) override {
    const auto k = lamb_constants<T>(grad_divisor, beta1, beta2, eps, weight_decay, step);
    for_each(count, LambDirection<T>{k, static_cast<const T*>(w), static_cast<T*>(g),
                                     static_cast<T*>(m), static_cast<T*>(v)});
  }

  // One pass instead of three over a tensor too large for any cache to keep between them.
  SquareSums lamb_direction_with_norms(const void* w, void* g, void* m, void* v, size_t count,
                                       double grad_divisor, double beta1, double beta2, double eps,
                                       double weight_decay, int64_t step) override {
    const auto k = lamb_constants<T>(grad_divisor, beta1, beta2, eps, weight_decay, step);
    if (count == 0) return {};
    const LambDirectionSquares<T> term{k, static_cast<const T*>(w), static_cast<T*>(g),
                                       static_cast<T*>(m), static_cast<T*>(v)};
    const SumPair sums = reduce<SumPair>(count, term);
    return {sums.first, sums.second};
  }

  void lamb_direction_with_norms_into(const void* w, void* g, void* m, void* v, size_t count,
                                      const UpdateStep* at, double beta1, double beta2, double eps,
                                      double weight_decay, double* sums) override {
    if (count == 0) return for_each(2, Fill<double>{sums, 0.0});
    const LambDirectionSquaresAtStep<T> term{{beta1, beta2, eps, weight_decay},
                                             at,
                                             static_cast<const T*>(w),
                                             static_cast<T*>(g),
                                             static_cast<T*>(m),
                                             static_cast<T*>(v)};
    reduce_into<SumPair>(count, term, StoreSumPair{sums});
  }

  void lamb_trust_update(void* w, const void* u, size_t count, const UpdateStep* at,
                         const double* sums) override {
    for_each(count, LambTrustStep<T>{static_cast<T*>(w), static_cast<const T*>(u), at, sums});
  }

  double narrow(const void* x, double scale, void* dst, size_t count, DType to) override {
    require_float16(to, "narrow");
    if (count == 0) return 0.0;
    const auto* src = static_cast<const T*>(x);
    auto* codes = static_cast<uint16_t*>(dst);
    const auto factor = static_cast<float>(scale);
    if (to == DType::bf16)
      return reduce<Largest>(count, NarrowAt<T, Bf16Codes>{src, factor, codes}).magnitude;
    return reduce<Largest>(count, NarrowAt<T, Fp16Codes>{src, factor, codes}).magnitude;
  }

  void widen(const void* src, DType from, void* dst, size_t count) override {
    require_float16(from, "widen");
    const auto* codes = static_cast<const uint16_t*>(src);
    if (from == DType::bf16)
      for_each(count, WidenAt<T, Bf16Codes>{codes, static_cast<T*>(dst)});
    else
      for_each(count, WidenAt<T, Fp16Codes>{codes, static_cast<T*>(dst)});
  }

 private:
  void drop(const void* x, void* dst, size_t count, float p, const MaskSeed& seed, uint64_t first) {
    const double keep_scale = dropout_keep_scale(p);
    for_each(count, Dropout<T>{static_cast<const T*>(x), static_cast<T*>(dst),
                               static_cast<double>(p), keep_scale, seed, first});
  }

  // The reference's message for the first position (in order) whose label is out of range.
  [[noreturn]] void throw_bad_label(const int32_t* labels, size_t position, int64_t classes,
                                    int64_t spatial) const {
    throw_label_outside_classes(fetch(labels + position), static_cast<int64_t>(position), spatial,
                                classes);
  }

  RangeSquares range_squares_;
};

// Losses and optimizers run on float32 values under mixed precision; reaching one of these with
// 16-bit values is a compile-step bug, not a user error (half_vector_ops.cpp's words).
[[noreturn]] void refuse(const char* op, DType t) {
  throw_runtime(std::string(op) + " does not run on " + dtype_name(t) +
                " values: losses and optimizers stay in float32 under mixed precision");
}

// The 16-bit ops: half_vector_ops.cpp's element-wise subset; the rest refuse as it refuses.
template <typename Codes>
class HalfOps final : public DeviceOps {
 public:
  using DeviceOps::DeviceOps;
  DType dtype() const override { return Codes::kDType; }

  void fill(void* x, size_t count, double value) override {
    for_each(count,
             Fill<uint16_t>{static_cast<uint16_t*>(x), Codes::store(static_cast<float>(value))});
  }

  void copy(const void* src, void* dst, size_t count) override {
    copy_bytes(src, dst, count * sizeof(uint16_t));
  }

  void add(const void* a, const void* b, void* dst, size_t count) override {
    for_each(count, HalfAdd<Codes>{static_cast<const uint16_t*>(a), static_cast<const uint16_t*>(b),
                                   static_cast<uint16_t*>(dst)});
  }

  void axpy(double alpha, const void* x, void* y, size_t count) override {
    for_each(count,
             HalfAxpy<Codes>{alpha, static_cast<const uint16_t*>(x), static_cast<uint16_t*>(y)});
  }

  void scale(double alpha, const void* x, void* dst, size_t count) override {
    for_each(count,
             HalfScale<Codes>{alpha, static_cast<const uint16_t*>(x), static_cast<uint16_t*>(dst)});
  }

  double sum_squares(const void* x, size_t count) override {
    if (count == 0) return 0.0;
    return reduce<Sum>(count, HalfSquareOf<Codes>{static_cast<const uint16_t*>(x)}).total;
  }

  void dropout_at(const void* x, void* dst, size_t count, float p, uint64_t seed,
                  uint64_t first) override {
    drop(x, dst, count, p, MaskSeed{seed, {}}, first);
  }
  void dropout_at_step(const void* x, void* dst, size_t count, float p, const DropoutSeed& s,
                       uint64_t first) override {
    drop(x, dst, count, p, MaskSeed{0, s}, first);
  }

  double mse(const void*, const void*, void*, size_t, double) override { refuse("mse", dtype()); }
  double softmax_cross_entropy(const void*, const int32_t*, const float*, double, void*, int64_t,
                               int64_t, int64_t, double) override {
    refuse("softmax_cross_entropy", dtype());
  }
  // The base's host defaults would read device memory: these refuse as the losses do.
  void mse_into(const void*, const void*, size_t, double*) override { refuse("mse", dtype()); }
  void mse_gradient(const void*, const void*, void*, size_t, double) override {
    refuse("mse", dtype());
  }
  void softmax_cross_entropy_gradient(const void*, const int32_t*, const float*, double, void*,
                                      int64_t, int64_t, int64_t, double) override {
    refuse("softmax_cross_entropy", dtype());
  }
  void softmax_cross_entropy_into(const void*, const int32_t*, const float*, double, int64_t,
                                  int64_t, int64_t, double*) override {
    refuse("softmax_cross_entropy", dtype());
  }
  void sum_squares_into(const void*, size_t, double*) override {
    refuse("sum_squares_into", dtype());
  }
  void fill_from(void*, const double*, double) override { refuse("fill_from", dtype()); }
  void lamb_trust_update(void*, const void*, size_t, const UpdateStep*, const double*) override {
    refuse("lamb", dtype());
  }
  void lamb_direction_with_norms_into(const void*, void*, void*, void*, size_t, const UpdateStep*,
                                      double, double, double, double, double*) override {
    refuse("lamb", dtype());
  }
  void lamb_direction_at_step(const void*, void*, void*, void*, size_t, const UpdateStep*, double,
                              double, double, double) override {
    refuse("lamb", dtype());
  }
  void sgd_keras_at_step(void*, const void*, void*, size_t, const UpdateStep*, double,
                         bool) override {
    refuse("sgd", dtype());
  }
  void adam_at_step(void*, const void*, void*, void*, size_t, const UpdateStep*, double, double,
                    double, double, bool) override {
    refuse("adam", dtype());
  }
  void lars_update_at_step(void*, const void*, void*, size_t, const UpdateStep*, double, double,
                           double) override {
    refuse("lars", dtype());
  }
  void flag_nonfinite(const double*, size_t, void*) override { refuse("flag_nonfinite", dtype()); }
  void widen_into(const void*, size_t, double*) override { refuse("widen_into", dtype()); }
  void range_sum_squares_into(const void*, const void*, const ElementRange*, size_t,
                              double*) override {
    refuse("range_sum_squares", dtype());
  }
  void lars_trust_update(void*, const void*, void*, size_t, const UpdateStep*, double,
                         const TrustRatioAt&) override {
    refuse("lars", dtype());
  }
  void sgd_keras_trust_update(void*, void*, void*, size_t, const UpdateStep*, double,
                              const TrustRatioAt&) override {
    refuse("lars", dtype());
  }
  void larc_trust_rescale(void*, const void*, size_t, const TrustRatioAt&, bool,
                          const UpdateStep*) override {
    refuse("larc", dtype());
  }
  void sgd_keras(void*, const void*, void*, size_t, double, double, bool) override {
    refuse("sgd", dtype());
  }
  void range_sum_squares(const void*, const void*, const ElementRange*, size_t, double*,
                         double*) override {
    refuse("range_sum_squares", dtype());
  }
  void lars_update(void*, const void*, void*, size_t, double, double, double, double) override {
    refuse("lars", dtype());
  }
  void adam(void*, const void*, void*, void*, size_t, double, double, double, double, double, bool,
            int64_t) override {
    refuse("adam", dtype());
  }
  void lamb_direction(const void*, void*, void*, void*, size_t, double, double, double, double,
                      double, int64_t) override {
    refuse("lamb", dtype());
  }
  double narrow(const void*, double, void*, size_t, DType) override { refuse("narrow", dtype()); }
  void widen(const void*, DType, void*, size_t) override { refuse("widen", dtype()); }

 private:
  void drop(const void* x, void* dst, size_t count, float p, const MaskSeed& seed, uint64_t first) {
    const double keep_scale = dropout_keep_scale(p);
    for_each(count, HalfDropout<Codes>{static_cast<const uint16_t*>(x), static_cast<uint16_t*>(dst),
                                       static_cast<double>(p), keep_scale, seed, first});
  }
};

}  // namespace

std::unique_ptr<VectorOps> make_vector_ops(DType dtype, cudaStream_t stream) {
  switch (dtype) {
    case DType::f32:
      return std::make_unique<Ops<float>>(stream);
    case DType::f64:
      return std::make_unique<Ops<double>>(stream);
    case DType::bf16:
      return std::make_unique<HalfOps<Bf16Codes>>(stream);
    case DType::f16:
      return std::make_unique<HalfOps<Fp16Codes>>(stream);
    default:
      break;
  }
  throw_usage("the cuda backend's vector ops are f32, f64, bf16 or f16 only, got " +
              dtype_name(dtype));
}

}  // namespace crest::cuda
