// Reference batch normalisation: plain loops over [n, channels, spatial], float and double.
// Statistics and sums are accumulated in double whatever the dtype (this is the oracle), and
// the variance takes two passes (mean first, then squared deviations), which is exact enough to
// check a float32 kernel against. The same code path serves local and synchronised batch norm:
// without a reducer the "group" is this rank alone.
#include <cmath>
#include <vector>

#include "crest/backends/batch_norm_kernel.hpp"
#include "reference/eltwise_math.hpp"
#include "reference/reference_kernels.hpp"

namespace crest::reference {
namespace {

// The workspace: the mean and variance the batch was normalised with, then the element count
// per channel they were computed over (the group's), all double.
struct SavedStats {
  double* mean;
  double* var;
  double* count;
};

template <typename T>
class BatchNorm final : public BatchNormKernel {
 public:
  explicit BatchNorm(const BatchNormDesc& d)
      : d_(d),
        spatial_(volume(widen(d.size, d.spatial_rank, 1))),
        shape_(activation_shape(d.n, d.channels, d.size, d.spatial_rank)),
        sums_(static_cast<size_t>(2 * d.channels + 1)),
        running_mean_(static_cast<size_t>(d.channels)),
        running_var_(static_cast<size_t>(d.channels)) {}

  MemFormat format() const override { return plain_format(shape_, d_.dtype); }
  size_t workspace_bytes() const override {
    return static_cast<size_t>(2 * d_.channels + 1) * sizeof(double);
  }
  size_t scratch_bytes() const override { return 0; }

  void forward_training(const void* src_v, const BatchNormParams& p, void* dst_v, void* workspace,
                        void*, BatchStatReducer* reducer) override {
    const T* x = static_cast<const T*>(src_v);
    const SavedStats s = saved(workspace);
    batch_statistics(x, s, reducer);
    normalize(x, s.mean, s.var, p, static_cast<T*>(dst_v));
    update_running_statistics(s, p);
  }

  void forward_inference(const void* src_v, const BatchNormParams& p, void* dst_v, void*) override {
    for (int64_t c = 0; c < d_.channels; ++c) {
      running_mean_[static_cast<size_t>(c)] = static_cast<const T*>(p.running_mean)[c];
      running_var_[static_cast<size_t>(c)] = static_cast<const T*>(p.running_var)[c];
    }
    normalize(static_cast<const T*>(src_v), running_mean_.data(), running_var_.data(), p,
              static_cast<T*>(dst_v));
  }

  void backward(const void* src_v, const void* diff_dst_v, const BatchNormParams& p,
                const void* workspace, void* diff_src_v, void* diff_weight_v, void* diff_bias_v,
                void*, BatchStatReducer* reducer) override {
    const T* x = static_cast<const T*>(src_v);
    const T* dy = static_cast<const T*>(diff_dst_v);
    const SavedStats s = saved(const_cast<void*>(workspace));
    const auto C = static_cast<size_t>(d_.channels);
    // sums_[c] = sum dy, sums_[C + c] = sum dy * x_hat: this rank's first (the parameter
    // gradients), then the group's (the input gradient).
    double* sum_dy = sums_.data();
    double* sum_dy_xhat = sums_.data() + C;
    std::fill(sums_.begin(), sums_.end(), 0.0);
    each([&](size_t c, int64_t i) {
      const double xhat = (static_cast<double>(x[i]) - s.mean[c]) * inv_std(s, c);
      sum_dy[c] += static_cast<double>(dy[i]);
      sum_dy_xhat[c] += static_cast<double>(dy[i]) * xhat;
    });
    for (size_t c = 0; c < C; ++c) {
      static_cast<T*>(diff_weight_v)[c] = static_cast<T>(sum_dy_xhat[c]);
      static_cast<T*>(diff_bias_v)[c] = static_cast<T>(sum_dy[c]);
    }
    if (reducer) reducer->allreduce_sum(sums_.data(), 2 * C);
    if (!diff_src_v) return;
    T* dx = static_cast<T*>(diff_src_v);
    const T* weight = static_cast<const T*>(p.weight);
    const double n = *s.count;
    each([&](size_t c, int64_t i) {
      const double k = inv_std(s, c);
      const double xhat = (static_cast<double>(x[i]) - s.mean[c]) * k;
      dx[i] =
          static_cast<T>(static_cast<double>(weight[c]) * k *
                         (static_cast<double>(dy[i]) - sum_dy[c] / n - xhat * sum_dy_xhat[c] / n));
    });
  }

 private:
  SavedStats saved(void* workspace) const {
    auto* w = static_cast<double*>(workspace);
    return {w, w + d_.channels, w + 2 * d_.channels};
  }

  double inv_std(const SavedStats& s, size_t c) const { return 1.0 / std::sqrt(s.var[c] + d_.eps); }

  // Mean and biased variance over the group: the count and sums of x are reduced first, then
  // the squared deviations from the group's mean (no E[x^2] - mean^2 cancellation).
  void batch_statistics(const T* x, const SavedStats& s, BatchStatReducer* reducer) {
    const auto C = static_cast<size_t>(d_.channels);
    std::vector<double>& sums = sums_;
    std::fill(sums.begin(), sums.end(), 0.0);
    each([&](size_t c, int64_t i) { sums[c] += static_cast<double>(x[i]); });
    sums[C] = static_cast<double>(d_.n * spatial_);
    if (reducer) reducer->allreduce_sum(sums.data(), C + 1);
    const double n = sums[C];
    for (size_t c = 0; c < C; ++c) s.mean[c] = sums[c] / n;
    std::fill(sums.begin(), sums.begin() + static_cast<std::ptrdiff_t>(C), 0.0);
    each([&](size_t c, int64_t i) {
      const double dev = static_cast<double>(x[i]) - s.mean[c];
      sums[c] += dev * dev;
    });
    if (reducer) reducer->allreduce_sum(sums.data(), C);
    for (size_t c = 0; c < C; ++c) s.var[c] = sums[c] / n;
    *s.count = n;
  }

  void normalize(const T* x, const double* mean, const double* var, const BatchNormParams& p,
                 T* y) const {
    const T* weight = static_cast<const T*>(p.weight);
    const T* bias = static_cast<const T*>(p.bias);
    each([&](size_t c, int64_t i) {
      const double v = (static_cast<double>(x[i]) - mean[c]) / std::sqrt(var[c] + d_.eps) *
                           static_cast<double>(weight[c]) +
                       static_cast<double>(bias[c]);
      y[i] = eltwise_forward(d_.post_op, static_cast<T>(v));
    });
  }

  // PyTorch's update, in the dtype: the unbiased variance n / (n - 1) with the group's n.
  void update_running_statistics(const SavedStats& s, const BatchNormParams& p) const {
    const double n = *s.count;
    if (n < 2)
      throw_input(
          "batch_norm in training needs more than one value per channel (batch x spatial "
          "= 1), as PyTorch's BatchNorm does");
    const T m = static_cast<T>(d_.momentum);
    T* running_mean = static_cast<T*>(p.running_mean);
    T* running_var = static_cast<T*>(p.running_var);
    for (int64_t c = 0; c < d_.channels; ++c) {
      const auto u = static_cast<size_t>(c);
      running_mean[c] = (T(1) - m) * running_mean[c] + m * static_cast<T>(s.mean[u]);
      running_var[c] = (T(1) - m) * running_var[c] + m * static_cast<T>(s.var[u] * n / (n - 1));
    }
    static_cast<T*>(p.num_batches_tracked)[0] += T(1);
  }

  // f(channel, flat index) over every element, in memory order.
  template <typename F>
  void each(F f) const {
    for (int64_t n = 0; n < d_.n; ++n)
      for (int64_t c = 0; c < d_.channels; ++c)
        for (int64_t s = 0, i = (n * d_.channels + c) * spatial_; s < spatial_; ++s, ++i)
          f(static_cast<size_t>(c), i);
  }

  BatchNormDesc d_;
  int64_t spatial_;
  Shape shape_;
  std::vector<double> sums_;                        // 2C + 1 per-channel sums (sized at creation)
  std::vector<double> running_mean_, running_var_;  // inference: the running stats, in double
};

// The float32 and float64 kernels; make_batch_norm wraps them for bf16 and fp16.
std::unique_ptr<BatchNormKernel> float_batch_norm(const BatchNormDesc& d) {
  require_float_dtype(d.dtype, "batch_norm");
  if (d.spatial_rank < 1 || d.spatial_rank > 3)
    throw_input("batch_norm spatial rank must be 1, 2 or 3, got " + std::to_string(d.spatial_rank));
  if (d.post_op.kind != EltwiseKind::none) validate_eltwise(d.post_op, "batch_norm post-op");
  if (d.dtype == DType::f64) return std::make_unique<BatchNorm<double>>(d);
  return std::make_unique<BatchNorm<float>>(d);
}

std::unique_ptr<BatchNormKernel> make_batch_norm(Backend& /*backend*/, const BatchNormDesc& d) {
  if (!is_half(d.dtype)) return float_batch_norm(d);
  BatchNormDesc f = d;
  f.dtype = DType::f32;
  return make_half_batch_norm(d, float_batch_norm(f));
}

}  // namespace

CREST_REGISTER_KERNEL(reference_batch_norm, "reference", BatchNormKernel, make_batch_norm);

}  // namespace crest::reference
