// The narrow kernel interface every backend implements (reference, onednn, later cuda).
//
// Kernels are created once at compile time from a descriptor (shapes, options, formats) and then
// executed with raw pointers into planned memory. Creation may be slow (primitive creation,
// algorithm choice); execution never allocates tensor memory. Each kernel may ask for transient
// scratch memory (valid only during one call) via scratch_bytes(); the executor hands in one
// shared scratch region sized for the largest request.
//
// Parameters (weights, biases) and their gradients are always in plain layout; a backend that
// prefers another weight layout reorders inside its kernel, using scratch.
//
// Every pointer handed to a kernel or to VectorOps points into memory from the backend's
// memory() resource (the executor's arena, the parameter store, optimizer state), and the work
// is issued on its stream(): host code reads results only after stream().synchronize() and,
// unless memory().is_host(), only through memory().copy_to_host.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <typeindex>
#include <vector>

#include "crest/backends/layout_tuning.hpp"
#include "crest/backends/stream.hpp"
#include "crest/core/device_collectives.hpp"
#include "crest/core/dtype.hpp"
#include "crest/core/enum_table.hpp"
#include "crest/core/error.hpp"
#include "crest/core/memory_resource.hpp"
#include "crest/core/shape.hpp"
#include "crest/core/tensor.hpp"

namespace crest {

// ---------------------------------------------------------------------------------------------
// Memory formats

// Backend-private description of a blocked format (e.g. a dnnl::memory::desc).
class OpaqueFormat {
 public:
  virtual ~OpaqueFormat() = default;
  virtual bool equals(const OpaqueFormat& other) const = 0;
  virtual std::string name() const = 0;
};

// Physical format of one activation tensor (logical shape includes the batch).
struct MemFormat {
  Shape shape;
  DType dtype = DType::f32;
  Layout layout = Layout::plain;
  size_t bytes = 0;                            // storage size incl. any padding of blocked formats
  std::shared_ptr<const OpaqueFormat> opaque;  // set iff layout == blocked

  bool operator==(const MemFormat& o) const;
  bool operator!=(const MemFormat& o) const { return !(*this == o); }
  std::string str() const;  // "f32[2, 32, 64, 64, 64] nCdhw16c"
};

MemFormat plain_format(const Shape& shape, DType dtype, Layout layout = Layout::plain);

// ---------------------------------------------------------------------------------------------
// Descriptors

enum class EltwiseKind : uint8_t { none, relu, leaky_relu, tanh, sigmoid, linear };

// y = f(x). leaky_relu: alpha is the negative slope; linear: y = alpha * x + beta.
// Backward always uses the output (dst): every kind listed is invertible in sign/value
// (leaky_relu requires alpha > 0), so in-place forward and fusion as a post-op are legal.
struct EltwiseDesc {
  EltwiseKind kind = EltwiseKind::none;
  float alpha = 0.f;
  float beta = 0.f;
};

struct ConvDesc {
  int spatial_rank = 3;  // 1, 2 or 3
  int64_t n = 1, in_channels = 1, out_channels = 1, groups = 1;
  std::array<int64_t, 3> in_size{1, 1, 1}, out_size{1, 1, 1};  // first spatial_rank used
  std::array<int64_t, 3> kernel{1, 1, 1}, stride{1, 1, 1}, dilation{1, 1, 1};  // dilation 1 = dense
  std::array<int64_t, 3> pad_lo{0, 0, 0}, pad_hi{0, 0, 0};
  bool bias = true;
  // With a bias: whether backward_weights computes its gradient (false: the compile step takes
  // it from elsewhere, src/graph/compile/route_bias_grad.cpp; diff_bias is then null).
  bool bias_grad = true;
  bool transposed = false;  // deconvolution: in/out swap roles; weights [in, out/groups, k...]
  EltwiseDesc post_op;      // fused activation applied to the output (forward only)
  DType dtype = DType::f32;
  // Which passes will run: forward only (an inference program), and whether backward_data does
  // (the first convolution needs no input gradient). A layout tuner times only these.
  bool training = true;
  bool data_grad = true;
};

enum class PoolKind : uint8_t { max, avg_include_pad, avg_exclude_pad };
template <>
inline constexpr EnumEntries<PoolKind, 3> kEnumTable<PoolKind> = {
    {{PoolKind::max, "max"},
     {PoolKind::avg_include_pad, "avg_include_pad"},
     {PoolKind::avg_exclude_pad, "avg_exclude_pad"}}};

struct PoolDesc {
  int spatial_rank = 3;
  PoolKind kind = PoolKind::max;
  int64_t n = 1, channels = 1;
  std::array<int64_t, 3> in_size{1, 1, 1}, out_size{1, 1, 1};
  std::array<int64_t, 3> kernel{1, 1, 1}, stride{1, 1, 1}, pad_lo{0, 0, 0}, pad_hi{0, 0, 0};
  DType dtype = DType::f32;
};

struct DenseDesc {
  int64_t n = 1, in_features = 1, out_features = 1;
  bool bias = true;
  DType dtype = DType::f32;
};

// ---------------------------------------------------------------------------------------------
// Kernels

class ConvKernel {
 public:
  virtual ~ConvKernel() = default;
  // The src/dst formats this kernel works in (chosen at creation; the compile step reorders the
  // producer's output into src_format() when they differ).
  virtual MemFormat src_format() const = 0;
  virtual MemFormat dst_format() const = 0;
  virtual size_t scratch_bytes() const = 0;
  // weights plain [out, in/groups, k...] ([in, out/groups, k...] when transposed).
  virtual void forward(const void* src, const void* weights, const void* bias, void* dst,
                       void* scratch) = 0;
  virtual void backward_data(const void* diff_dst, const void* weights, void* diff_src,
                             void* scratch) = 0;
  // Overwrites diff_weights / diff_bias (diff_bias may be null when the conv has no bias).
  virtual void backward_weights(const void* src, const void* diff_dst, void* diff_weights,
                                void* diff_bias, void* scratch) = 0;
  // What runs each pass, for profiles ("brgconv:avx2 / brg_fwd:avx2+brgconv:avx2 /
  // gemm:jit"): the instruction set a layer really gets; "" where there is nothing to say.
  virtual std::string implementation() const { return ""; }
};

class PoolKernel {
 public:
  virtual ~PoolKernel() = default;
  virtual MemFormat src_format() const = 0;
  virtual MemFormat dst_format() const = 0;
  virtual size_t workspace_bytes() const = 0;  // kept from forward to backward (max indices)
  virtual size_t scratch_bytes() const = 0;
  virtual void forward(const void* src, void* dst, void* workspace, void* scratch) = 0;
  virtual void backward(const void* diff_dst, const void* workspace, void* diff_src,
                        void* scratch) = 0;
};

// Works on any format (element-wise), in place allowed (dst == src, diff_src == diff_dst).
class EltwiseKernel {
 public:
  virtual ~EltwiseKernel() = default;
  virtual void forward(const void* src, void* dst) = 0;
  virtual void backward(const void* dst, const void* diff_dst, void* diff_src) = 0;
};

class DenseKernel {
 public:
  virtual ~DenseKernel() = default;
  virtual size_t scratch_bytes() const = 0;
  // src plain [n, in]; weights plain [out, in]; dst plain [n, out].
  virtual void forward(const void* src, const void* weights, const void* bias, void* dst,
                       void* scratch) = 0;
  virtual void backward_data(const void* diff_dst, const void* weights, void* diff_src,
                             void* scratch) = 0;
  virtual void backward_weights(const void* src, const void* diff_dst, void* diff_weights,
                                void* diff_bias, void* scratch) = 0;
};

// Copies a tensor from one format to another (same logical shape and dtype).
class ReorderKernel {
 public:
  virtual ~ReorderKernel() = default;
  virtual void execute(const void* src, void* dst) = 0;
};

// Concatenation along the channel axis (dim 1) of tensors in one common format.
class ConcatKernel {
 public:
  virtual ~ConcatKernel() = default;
  virtual MemFormat dst_format() const = 0;
  virtual void forward(const std::vector<const void*>& srcs, void* dst) = 0;
  // diff_srcs[i] may be null (that input needs no gradient).
  virtual void backward(const void* diff_dst, const std::vector<void*>& diff_srcs) = 0;
};

// A slice of a flat buffer in elements: one tensor of the parameter store (for per-tensor work).
struct ElementRange {
  size_t offset = 0;
  size_t count = 0;
};

// Element-wise operations on flat buffers of `count` elements of the kernel's dtype, used for
// everything oneDNN has no primitive for: losses, dropout, gradient sums, optimizer updates.
// Buffers are plain unless stated; all are safe to call with aliasing where noted.
class VectorOps {
 public:
  virtual ~VectorOps() = default;
  virtual DType dtype() const = 0;
  virtual void fill(void* x, size_t count, double value) = 0;
  virtual void copy(const void* src, void* dst, size_t count) = 0;
  // dst = a + b (dst may alias a or b)
  virtual void add(const void* a, const void* b, void* dst, size_t count) = 0;
  // y = alpha * x + y
  virtual void axpy(double alpha, const void* x, void* y, size_t count) = 0;
  // dst = alpha * x (dst may alias x)
  virtual void scale(double alpha, const void* x, void* dst, size_t count) = 0;
  virtual double sum_squares(const void* x, size_t count) = 0;
  // The per-tensor norms LARS and LARC need, in one call and one pass over both buffers: for each
  // of the n ranges, a_sq[i] = the sum of a^2 and b_sq[i] = the sum of b^2 over ranges[i] (a the
  // weights, b the gradients). The sums depend on the ranges only, not on the thread count.
  virtual void range_sum_squares(const void* a, const void* b, const ElementRange* ranges, size_t n,
                                 double* a_sq, double* b_sq) = 0;

  // Dropout with a counter-based mask: element i is kept iff hash(seed, first + i) >= p, so
  // backward recomputes the mask instead of storing it, and a part of a tensor (a rank's block of
  // a spatially split one) draws the whole tensor's mask from its elements' positions in it.
  // dst = keep ? x / (1 - p) : 0. In place allowed.
  virtual void dropout_at(const void* x, void* dst, size_t count, float p, uint64_t seed,
                          uint64_t first) = 0;
  void dropout(const void* x, void* dst, size_t count, float p, uint64_t seed) {
    dropout_at(x, dst, count, p, seed, 0);
  }
  // A layer's masks in a training step whose counter lives in the backend's memory (Executor), so
  // a step's kernels take the same arguments every step and a captured step (a CUDA graph)
  // replays with the next step's masks instead of the ones it was captured with.
  struct DropoutSeed {
    uint64_t run_seed = 0;           // CompileOptions::seed
    uint64_t stream = 0;             // the layer's random stream
    const uint64_t* step = nullptr;  // the training steps taken, in the backend's memory
  };
  // dropout_at with the seed dropout_seed(s.run_seed, *s.step, s.stream), read where it runs.
  virtual void dropout_at_step(const void* x, void* dst, size_t count, float p,
                               const DropoutSeed& s, uint64_t first);
  // The step counter in the backend's memory, changed where it lives (queued on a device; no
  // copy): *counter = value, and ++*counter.
  virtual void set_counter(uint64_t* counter, uint64_t value);
  virtual void increment_counter(uint64_t* counter);

  // Mean squared error over `count` elements; returns the loss and writes
  // diff = 2 (pred - target) / count * diff_scale (none where diff is null: the loss only).
  virtual double mse(const void* pred, const void* target, void* diff, size_t count,
                     double diff_scale) = 0;

  // Softmax cross-entropy over `classes` channels of plain [n, classes, spatial] logits with
  // integer labels (int32 [n, spatial]), per-class weights and label smoothing e (0 <= e < 1):
  // each position's target distribution is q_c = (1 - e) [c == label] + e / classes, and the loss
  // is the plain mean over n * spatial positions of weight[label] * sum_c q_c * -log softmax[c]
  // (e = 0: weight[label] * -log softmax[label]; unweighted, PyTorch's cross_entropy with
  // label_smoothing=e). Writes d loss / d logits = weight[label] (softmax - q) / (n * spatial)
  // times diff_scale, unless diff_logits is null (the loss only).
  virtual double softmax_cross_entropy(const void* logits, const int32_t* labels,
                                       const float* class_weights, double label_smoothing,
                                       void* diff_logits, int64_t n, int64_t classes,
                                       int64_t spatial, double diff_scale) = 0;

  // The values a training step reads back, written into `out` (doubles in the backend's memory)
  // instead of returned, so a device queues them and waits for nothing: the step reads them once,
  // after its backward (Executor::loss). The defaults call the returning forms above and store
  // the result: right where the memory is host memory; a device backend overrides every one.
  // out[0] = sum_squares(x, count).
  virtual void sum_squares_into(const void* x, size_t count, double* out);
  // out[0] = the loss mse(pred, target, nullptr, count, 1) returns.
  virtual void mse_into(const void* pred, const void* target, size_t count, double* out);
  // out[0] = the loss softmax_cross_entropy returns (no gradient); out[1] = -1, or the first
  // position (n-major) whose label is outside [0, classes) where a device backend cannot throw
  // during the pass (the default throws as the returning form does).
  virtual void softmax_cross_entropy_into(const void* logits, const int32_t* labels,
                                          const float* class_weights, double label_smoothing,
                                          int64_t n, int64_t classes, int64_t spatial, double* out);
  // The losses' gradients alone (a loss layer's backward): mse's and softmax_cross_entropy's
  // diff, their loss not returned, so a device waits for nothing.
  virtual void mse_gradient(const void* pred, const void* target, void* diff, size_t count,
                            double diff_scale);
  virtual void softmax_cross_entropy_gradient(const void* logits, const int32_t* labels,
                                              const float* class_weights, double label_smoothing,
                                              void* diff_logits, int64_t n, int64_t classes,
                                              int64_t spatial, double diff_scale);
  // x[0] = factor * value[0], in this dtype: a loss layer's output tensor from its double.
  virtual void fill_from(void* x, const double* value, double factor);
  // flag[0] = 1 where any of values[0, n) is not finite; otherwise flag[0] is left as it is. A
  // non-finite loss raises the step's sideband flag without the host reading the loss.
  virtual void flag_nonfinite(const double* values, size_t n, void* flag);
  // out[i] = x[i] as a double for i < n (this dtype: float32 or float64): the gradients' sideband
  // flags, read with the loss in the step's one copy (TrainStep).
  virtual void widen_into(const void* x, size_t n, double* out);

  // Keras-form SGD with momentum: v = m v - lr g; w = w + v. With nesterov, Keras's Nesterov
  // form: the same v, then w = w + m v - lr g (the weights stay one momentum step ahead).
  virtual void sgd_keras(void* w, const void* g, void* v, size_t count, double lr, double momentum,
                         bool nesterov) = 0;
  // Adam / AdamW (decoupled weight decay when decoupled is true, else L2 added to g).
  // step is 1-based (bias correction).
  virtual void adam(void* w, const void* g, void* m, void* v, size_t count, double lr, double beta1,
                    double beta2, double eps, double weight_decay, bool decoupled,
                    int64_t step) = 0;
  // LARS's update of one tensor in torch's momentum form (timm's Lars): d = grad_scale (g +
  // weight_decay w); buf = momentum buf + d; w = w - lr buf. grad_scale is the tensor's trust
  // ratio (1 and weight_decay 0 for an excluded tensor). g is only read.
  virtual void lars_update(void* w, const void* g, void* buf, size_t count, double lr,
                           double momentum, double grad_scale, double weight_decay) = 0;

  // What an update changes from step to step, in the backend's memory: the optimizer writes it
  // once per step (StagedValues: one small copy from page-locked memory on a device) and the update
  // kernels below read it where they run, so they take the same arguments every step and a
  // captured update (a CUDA graph) replays with the next step's rate. The optimizer checks the
  // values before it writes them (a kernel cannot refuse them).
  struct UpdateStep {
    double lr = 0;
    double grad_divisor = 1;  // LAMB's global-norm clip: max(1, ||g|| / max_grad_norm)
    int64_t step = 1;         // 1-based: Adam's and LAMB's bias correction
  };
  // sgd_keras, adam, lars_update and lamb_direction with at->lr, at->step and at->grad_divisor.
  // The defaults read *at (host memory) and call those.
  virtual void sgd_keras_at_step(void* w, const void* g, void* v, size_t count,
                                 const UpdateStep* at, double momentum, bool nesterov);
  virtual void adam_at_step(void* w, const void* g, void* m, void* v, size_t count,
                            const UpdateStep* at, double beta1, double beta2, double eps,
                            double weight_decay, bool decoupled);
  virtual void lars_update_at_step(void* w, const void* g, void* buf, size_t count,
                                   const UpdateStep* at, double momentum, double grad_scale,
                                   double weight_decay);
  virtual void lamb_direction_at_step(const void* w, void* g, void* m, void* v, size_t count,
                                      const UpdateStep* at, double beta1, double beta2, double eps,
                                      double weight_decay);
  // LARS's and LARC's trust ratios with the tensors' norms left in the backend's memory, so a
  // device waits for nothing (as LAMB's below): range_sum_squares writing sums[i] = the sum of
  // a^2 and sums[n + i] = that of b^2 over ranges[i] (ranges: a host array); then updates that
  // compute a tensor's ratio where they run from its two sums (TrustRatioAt: trust_ratio of their
  // square roots, in double, bit for bit the host's). The defaults read the sums where they are
  // and call the forms above: right where the memory is host memory.
  virtual void range_sum_squares_into(const void* a, const void* b, const ElementRange* ranges,
                                      size_t n, double* sums);
  struct TrustRatioAt {
    const double* w_sq;  // the tensor's sum of w^2 in the backend's memory
    const double* g_sq;  // and of g^2
    double coefficient, weight_decay, eps;
  };
  // lars_update at at->lr with grad_scale the ratio and weight_decay ratio.weight_decay (torch's
  // form).
  virtual void lars_trust_update(void* w, const void* g, void* buf, size_t count,
                                 const UpdateStep* at, double momentum, const TrustRatioAt& ratio);
  // LARS's Keras form: g += weight_decay w (where it is not 0), then sgd_keras at at->lr times the
  // ratio (no Nesterov). The gradient is consumed.
  virtual void sgd_keras_trust_update(void* w, void* g, void* v, size_t count, const UpdateStep* at,
                                      double momentum, const TrustRatioAt& ratio);
  // LARC's rescaling (apex): where neither sum is 0, g += weight_decay w (where it is not 0),
  // then g = a g with a = larc_factor(the ratio, clip, at->lr); else g is left as it is.
  virtual void larc_trust_rescale(void* g, const void* w, size_t count, const TrustRatioAt& ratio,
                                  bool clip, const UpdateStep* at);

  // LAMB's first stage (apex FusedLAMB with its defaults: bias correction, gradient averaging,
  // decoupled weight decay), element-wise: c = g / grad_divisor (the global-norm clip; 1 when
  // the norm is within bounds); m = beta1 m + (1 - beta1) c; v = beta2 v + (1 - beta2) c^2;
  // u = (m / (1 - beta1^step)) / (sqrt(v / (1 - beta2^step)) + eps) + weight_decay w.
  // u is written over g: the gradient is consumed, as apex does, so the trust ratio's norms and
  // the update read it without another buffer. step is 1-based. w is only read.
  virtual void lamb_direction(const void* w, void* g, void* m, void* v, size_t count,
                              double grad_divisor, double beta1, double beta2, double eps,
                              double weight_decay, int64_t step) = 0;
  // lamb_direction on one tensor, also returning the sums of squares of w and of the new u that
  // sum_squares(w, count) and sum_squares(u, count) would return, to the bit: the trust ratio's
  // norms without two more passes over the tensor. This default makes the three calls; a backend
  // whose tensors do not stay in cache between them fuses them.
  struct SquareSums {
    double w = 0, u = 0;
  };
  virtual SquareSums lamb_direction_with_norms(const void* w, void* g, void* m, void* v,
                                               size_t count, double grad_divisor, double beta1,
                                               double beta2, double eps, double weight_decay,
                                               int64_t step);

  // LAMB's trust-ratio step with its norms left in the backend's memory, so a device waits for
  // nothing: lamb_direction_with_norms (at at->step and at->grad_divisor) writing sums[0] = the
  // sum of w^2 and sums[1] = that of the new u; then w = w - lr r u (lr = at->lr) with
  // r = ||w|| / ||u||, or 1 where either is 0 or where sums is null (no weight decay: apex's plain
  // step), the ratio computed from those sums where the update runs (bit for bit the host's: r
  // and lr r in double). The defaults call lamb_direction_with_norms and axpy: right where the
  // memory is host memory.
  virtual void lamb_direction_with_norms_into(const void* w, void* g, void* m, void* v,
                                              size_t count, const UpdateStep* at, double beta1,
                                              double beta2, double eps, double weight_decay,
                                              double* sums);
  virtual void lamb_trust_update(void* w, const void* u, size_t count, const UpdateStep* at,
                                 const double* sums);

  // The gradient lag's local correction (LaggedGradients), one pass over the trainable
  // gradients: with o = grads[i] (this rank's gradient of the step) and s_o = T(own_scale o),
  //   sent[i] = o; own_previous[i] = s_o;
  //   grads[i] = replace_share ? T(s_o - T(own_previous[i] - average[i])) : s_o
  // (own_previous[i] read before it is written; T the dtype, every product and difference in
  // double), so one rank, whose previous gradient is the average, applies s_o bit for bit. The
  // default makes the copy, axpy and scale calls that round the same way; a backend whose buffers
  // do not stay in cache between them fuses them (six memory streams instead of twelve).
  virtual void lag_correction(void* grads, const void* average, void* own_previous, void* sent,
                              size_t count, double own_scale, bool replace_share);

  // 16-bit floats for communication (gradient compression), written once above these two.
  // narrow: v = float(x[i]) * float(scale) (a float product), dst[i] = the 16-bit code of v in
  // `to` (DType::bf16 or DType::f16), rounded to nearest even exactly as crest/core/bf16.hpp and
  // fp16.hpp round: NaN stays NaN, values beyond the range become infinite. Returns the largest
  // |v| (NaN skipped), so a caller can refuse values the narrow type cannot hold.
  virtual double narrow(const void* x, double scale, void* dst, size_t count, DType to) = 0;
  // dst[i] = the value of the 16-bit code src[i] of type `from` (bf16 or f16), exactly.
  virtual void widen(const void* src, DType from, void* dst, size_t count) = 0;
};

// LARS's and LARC's trust ratio: eta ||w|| / (||g|| + weight_decay ||w|| + eps), or 1 when
// either norm is 0 (a zero tensor, or one without gradient, has no scale to measure the step
// against). The cuda backend's kernels compute the same in double.
double trust_ratio(double w_norm, double g_norm, double trust_coefficient, double weight_decay,
                   double eps);
// The seed of the dropout masks of random stream `stream` (a layer) at training step `step` of a
// run seeded `run_seed`: another mask every step and every layer, reproducible from the seed.
uint64_t dropout_seed(uint64_t run_seed, uint64_t step, uint64_t stream);

// LARC's factor from the ratio: min(ratio / lr, 1) in clip mode (lr 0 clips to 1: the step is 0
// anyway), the ratio itself in scale mode.
double larc_factor(double ratio, bool clip, double lr);

// LAMB's trust ratio from the sums of squares of w and u: ||w|| / ||u||, or 1 where either norm
// is 0 (the cuda backend's kernels compute the same in double).
double lamb_trust_ratio(double w_sum_squares, double u_sum_squares);

// softmax_cross_entropy's error for a label outside [0, classes) at `position` (n-major over
// n * spatial positions), the same words on every backend and wherever it is found.
[[noreturn]] void throw_label_outside_classes(int32_t label, int64_t position, int64_t spatial,
                                              int64_t classes);

// Whether a backend can create a kernel, and why not: the compile error names the node and
// repeats `reason` ("f64: the onednn backend computes in f32 only").
struct Support {
  bool ok = true;
  std::string reason;
  explicit operator bool() const { return ok; }
  static Support yes() { return {}; }
  static Support no(std::string why) { return {false, std::move(why)}; }
};

// Channel concatenation by rows, as the reference and cuda backends run it: a row is a sample of
// a plain tensor, or one position of a sample of a channels-last one, and holds an input's
// channels contiguously. channel_rows: how many rows `f` has. rows_concatenable: whether `srcs`
// share one such layout (else no, naming `backend` and the formats).
int64_t channel_rows(const MemFormat& f);
Support rows_concatenable(const std::vector<MemFormat>& srcs, const std::string& backend);

// ---------------------------------------------------------------------------------------------

// A backend's compute peak: the best rate of a timed n x n x n GEMM (`crest bench peak`, the
// report's "% of peak").
struct PeakRate {
  bool supported = false;  // false: no fast path for the dtype here, or the backend measures none
  double gflops = 0;
  std::string implementation;  // what ran, or why nothing did
};

// A backend: the kernels, the memory they run on and the stream they run in. The factories below
// first ask the matching supports() query and throw crest::Error (usage) with its reason, so a
// backend implements only the protected create_* hooks and never half-creates a kernel it cannot
// run; callers that want another path (a fallback backend, a different dtype) ask supports()
// themselves first.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual Device device() const = 0;
  virtual bool supports(DType dtype) const = 0;
  // supports(dtype) with the reason when not: a run asked to compute in a dtype this backend (or
  // this machine: bf16 and fp16 need their instruction sets) cannot run fast is refused with it.
  virtual Support supports_dtype(DType dtype) const;
  // Whether conv kernels can apply this activation as a fused post-op.
  virtual bool fuses(const EltwiseDesc& e) const = 0;

  // Where this backend's kernels read and write (see the file comment), and the order they run.
  virtual MemoryResource& memory() const = 0;
  virtual Stream& stream() const = 0;

  // Per-descriptor queries, answered without creating anything. The defaults ask supports(dtype)
  // for the descriptor's dtype; a backend overrides what it knows better.
  virtual Support supports(const ConvDesc& d) const;
  virtual Support supports(const PoolDesc& d) const;
  virtual Support supports(const DenseDesc& d) const;
  virtual Support supports(const EltwiseDesc& d, const MemFormat& f) const;
  virtual Support supports(const MemFormat& reorder_from, const MemFormat& reorder_to) const;
  virtual Support supports(const std::vector<MemFormat>& concat_srcs) const;

  // `src_hint` is the format the producer delivers; a kernel may keep it or choose another
  // (then src_format() differs and the compile step inserts a reorder).
  std::unique_ptr<ConvKernel> conv(const ConvDesc& d, const MemFormat& src_hint);
  std::unique_ptr<PoolKernel> pool(const PoolDesc& d, const MemFormat& src_hint);
  std::unique_ptr<EltwiseKernel> eltwise(const EltwiseDesc& d, const MemFormat& f);
  std::unique_ptr<DenseKernel> dense(const DenseDesc& d);
  std::unique_ptr<ReorderKernel> reorder(const MemFormat& from, const MemFormat& to);
  std::unique_ptr<ConcatKernel> concat(const std::vector<MemFormat>& srcs);
  std::unique_ptr<VectorOps> vector_ops(DType dtype);

  // Sets the number of compute threads this backend uses; returns the number it will really use
  // (what a run reports: the reference backend is single-threaded whatever it is asked).
  virtual int set_threads(int threads) = 0;
  // How the convolutions created from now on keep what they choose by measuring (TunedChoices,
  // src/backends/tuned_choices.hpp): oneDNN's layouts, cuda's cuDNN algorithms. The default
  // ignores it (a backend that measures nothing has nothing to keep).
  virtual void set_layout_tuning(const LayoutTuning& /*tuning*/) {}

  // The machine's GEMM rate through this backend's library for `dtype` (n^3, best of `iters`).
  // The instruction sets this backend's kernels dispatch to on this machine, for logs and
  // benchmark lines ("" where that says nothing: the reference backend's plain loops).
  virtual std::string instruction_sets() const { return ""; }
  virtual PeakRate peak(DType /*dtype*/, int64_t /*n*/, int /*iters*/) {
    return {false, 0, "the " + name() + " backend measures no peak"};
  }
  // The memory a model compiled for this backend may take, where the backend knows it and the
  // node's memory does not say it (a GPU's free memory), and where that figure comes from;
  // bytes 0 where the node's memory rule applies (host backends).
  struct MemoryCapacity {
    size_t bytes = 0;
    std::string source;
  };
  virtual MemoryCapacity memory_capacity() const { return {}; }
  // Whether device_collectives() can make collectives on this machine (the library loads), with
  // the reason when not. Not collective: every rank asks, and all make them only if all can.
  virtual Support supports_device_collectives() const {
    return Support::no("the " + name() + " backend has no collectives of its own");
  }
  // Collectives on this backend's memory for rank `rank` of `ranks` (NCCL on the cuda backend);
  // null where it has none (host backends: MPI reads their memory directly). Collective: every
  // rank of the group calls it; `share_from_first` is one too, replacing every rank's `bytes` at
  // `data` with rank 0's (how the bootstrap's unique id travels over the job's MPI).
  virtual std::unique_ptr<DeviceCollectives> device_collectives(
      int /*rank*/, int /*ranks*/,
      const std::function<void(void* data, size_t bytes)>& /*share_from_first*/) {
    return nullptr;
  }
  // A backend whose registered kernels run on this backend's memory when it has none of its own
  // for a kernel type (a CPU backend names "reference": slow, but correct); "" for none.
  virtual std::string kernel_fallback() const { return ""; }

 protected:
  // Called only after the matching supports() said yes.
  virtual std::unique_ptr<ConvKernel> create_conv(const ConvDesc& d, const MemFormat& src_hint) = 0;
  virtual std::unique_ptr<PoolKernel> create_pool(const PoolDesc& d, const MemFormat& src_hint) = 0;
  virtual std::unique_ptr<EltwiseKernel> create_eltwise(const EltwiseDesc& d,
                                                        const MemFormat& f) = 0;
  virtual std::unique_ptr<DenseKernel> create_dense(const DenseDesc& d) = 0;
  virtual std::unique_ptr<ReorderKernel> create_reorder(const MemFormat& from,
                                                        const MemFormat& to) = 0;
  virtual std::unique_ptr<ConcatKernel> create_concat(const std::vector<MemFormat>& srcs) = 0;
  virtual std::unique_ptr<VectorOps> create_vector_ops(DType dtype) = 0;

 private:
  // Throws crest::Error (usage) "backend 'x' cannot create <what>: <reason>" unless s.
  void require(const Support& s, const std::string& what) const;
};

// ---------------------------------------------------------------------------------------------
// Kernels beyond the fixed families above register per backend, so a new layer with a new
// kernel adds files instead of editing this interface and every backend's factory:
//
//   struct ChannelAffineKernel { using Desc = ChannelAffineDesc; static constexpr const char*
//                                kName = "channel_affine"; virtual ... };   // its own header
//   CREST_REGISTER_KERNEL(reference_channel_affine, "reference", ChannelAffineKernel, make);
//   auto k = make_kernel<ChannelAffineKernel>(ctx.backend, desc);          // in Layer::create

template <typename K>
using KernelMaker = std::unique_ptr<K> (*)(Backend& backend, const typename K::Desc& desc);

namespace kernel_registry {
void add(const std::string& backend, std::type_index kernel, std::shared_ptr<const void> maker);
const void* find(const std::string& backend, std::type_index kernel);  // null: none
}  // namespace kernel_registry

template <typename K>
bool register_kernel(const std::string& backend, KernelMaker<K> make) {
  kernel_registry::add(backend, typeid(K), std::make_shared<const KernelMaker<K>>(make));
  return true;
}

// The backend's own kernel, else its fallback's; throws crest::Error (usage) naming both.
template <typename K>
std::unique_ptr<K> make_kernel(Backend& backend, const typename K::Desc& desc) {
  for (const std::string& name : {backend.name(), backend.kernel_fallback()}) {
    if (name.empty()) continue;
    if (const void* m = kernel_registry::find(name, typeid(K)))
      return (*static_cast<const KernelMaker<K>*>(m))(backend, desc);
  }
  throw_usage(
      "backend '" + backend.name() + "' has no " + K::kName + " kernel" +
      (backend.kernel_fallback().empty() ? "" : " (nor has '" + backend.kernel_fallback() + "')"));
}

#define CREST_REGISTER_KERNEL(id, backend, Kernel, maker)           \
  [[maybe_unused]] static const bool crest_kernel_registered_##id = \
      ::crest::register_kernel<Kernel>(backend, maker)

// Backends register their factory with one line in their own folder (only the folders CMake
// builds are linked): CREST_REGISTER_BACKEND(onednn, "onednn", make_onednn_backend, 10);
// `preference` ranks the backends for default_backend_name(): the fastest built one wins.
// A backend that needs hardware the machine may lack (a GPU) also registers `available`, which
// says whether this process can run it and why not, without creating anything:
// CREST_REGISTER_DEVICE_BACKEND(cuda, "cuda", make_cuda_backend, 5, cuda_available).
bool register_backend(const std::string& name, std::unique_ptr<Backend> (*make)(), int preference,
                      Support (*available)() = nullptr);

#define CREST_REGISTER_BACKEND(id, name, make, preference)           \
  [[maybe_unused]] static const bool crest_backend_registered_##id = \
      ::crest::register_backend(name, make, preference)
#define CREST_REGISTER_DEVICE_BACKEND(id, name, make, preference, available) \
  [[maybe_unused]] static const bool crest_backend_registered_##id =         \
      ::crest::register_backend(name, make, preference, available)

// The backend runs use unless told otherwise (crest.backend, --backend): the usable one of
// highest preference ("onednn" where it is built, else "reference").
std::string default_backend_name();

// make_backend: a registered backend by name. Throws crest::Error (usage) naming the backend and
// the usable ones when `name` is unknown, and naming what is missing when the backend was built
// but cannot run here ("backend 'cuda' cannot run on this machine: no CUDA device ...").
std::unique_ptr<Backend> make_backend(const std::string& name);
// The backends this process can run, "reference" first ("onednn" when built; "cuda" when built
// and a device is there): what a run may choose and what tests compare.
std::vector<std::string> backend_names();
// Every backend built into this binary, usable here or not (`crest --version`, docs).
std::vector<std::string> built_backend_names();

}  // namespace crest
