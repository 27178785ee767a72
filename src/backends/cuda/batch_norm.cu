// The batch_norm kernel (crest/backends/batch_norm_kernel.hpp) on device memory: [n, channels,
// spatial...] values of float32, or of bf16 / fp16 under mixed precision (read as float, each
// result rounded once; parameters and running statistics stay float32), plain or channels-last
// as the producer hints (context.hpp; the compile step reorders into format()). Channels-last
// values are plain [n x spatial, channels, 1] to the kernels below: each channel's values are
// visited in the same order as plain ones, so both layouts give the same bits. It follows the
// reference (reference/batch_norm.cpp) step by step and in its precision: statistics and backward
// sums accumulated in double, the variance in two passes (the mean first, then squared deviations),
// each element normalised in double and rounded to float before the fused ReLU, the running
// statistics updated in float. CMakeLists.txt compiles this file with --fmad=false, so each
// element's formula rounds as the reference's does; only the order of the per-channel sums differs.
// Those are one block per channel: each thread adds a strided slice of the channel's values, the
// block combines its threads in a fixed tree, so every run gives the same bits.
//
// Without a reducer nothing waits for the device. With one (synchronised batch norm) the sums go
// through host memory, as the reducer takes it, in the reference's sequence: the sums of x with
// the element count, then the sums of squared deviations from the group's mean, and in backward
// the sums of dy and of dy * x_hat; each is copied to the host, the stream waited for, reduced,
// and the result copied back before the work that needs it is queued.
#include <algorithm>
#include <string>
#include <vector>

#include "crest/backends/batch_norm_kernel.hpp"
#include "cuda/check.hpp"
#include "cuda/cuda_kernels.hpp"
#include "cuda/elements.cuh"
#include "cuda/launch.cuh"

namespace crest::cuda {
namespace {

// The workspace, the reference's layout: the mean and biased variance the batch was normalised
// with, then the element count per channel they were computed over (the group's), all double.
struct Saved {
  double* mean;
  double* var;
  double* count;
};

__device__ double inv_std(double var, double eps) { return 1.0 / sqrt(var + eps); }

// What the forward statistics add per value of channel c at flat index i.
template <typename E>
struct ValueOf {
  const Stored<E>* x;
  __device__ double operator()(size_t /*c*/, size_t i) const {
    return static_cast<double>(E::load(x[i]));
  }
};

template <typename E>
struct SquaredDeviation {
  const Stored<E>* x;
  const double* mean;
  __device__ double operator()(size_t c, size_t i) const {
    const double dev = static_cast<double>(E::load(x[i])) - mean[c];
    return dev * dev;
  }
};

// One block per channel: out[c] = (the sum of term over the channel's values) / divisor. A
// divisor of 1 leaves the sum itself, exactly.
template <typename Term>
__global__ void channel_sums_kernel(Term term, Planes p, double divisor, double* out) {
  for (size_t c = blockIdx.x; c < p.channels; c += gridDim.x) {
    double sum = 0;
    for (size_t j = threadIdx.x; j < p.per_channel(); j += blockDim.x) sum += term(c, p.at(c, j));
    sum = block_sum(sum);
    if (threadIdx.x == 0) out[c] = sum / divisor;
  }
}

__global__ void store_kernel(double* where, double value) { *where = value; }

// The fused activation: ReLU (with slope alpha, 0) or none.
struct PostOp {
  bool relu;
  float alpha;
};

// y = post_op(float((x - mean) / sqrt(var + eps) * weight + bias)), computed in double. Stat:
// double (the batch's statistics) or float (the running ones).
template <typename E, typename Stat>
__global__ void normalize_kernel(const Stored<E>* x, const Stat* mean, const Stat* var,
                                 const float* weight, const float* bias, double eps, PostOp post,
                                 Stored<E>* y, Planes p) {
  for (size_t i = first_index(); i < p.elements(); i += grid_stride()) {
    const size_t c = p.channel_of(i);
    const double v = (static_cast<double>(E::load(x[i])) - static_cast<double>(mean[c])) /
                         sqrt(static_cast<double>(var[c]) + eps) * static_cast<double>(weight[c]) +
                     static_cast<double>(bias[c]);
    const auto out = static_cast<float>(v);
    y[i] = E::store(post.relu && !(out > 0.f) ? post.alpha * out : out);
  }
}

// What a training forward updates: the running statistics and the counter.
struct Running {
  float* mean;
  float* var;
  float* counter;
};

// PyTorch's update in float: the unbiased variance with the group's count n; the counter once.
__global__ void update_running_kernel(Saved s, double n, float m, Running r, size_t channels) {
  for (size_t c = first_index(); c < channels; c += grid_stride()) {
    r.mean[c] = (1.f - m) * r.mean[c] + m * static_cast<float>(s.mean[c]);
    r.var[c] = (1.f - m) * r.var[c] + m * static_cast<float>(s.var[c] * n / (n - 1));
  }
  if (first_index() == 0) r.counter[0] += 1.f;
}

// One block per channel: this rank's sums of dy (sums[c]) and dy * x_hat (sums[C + c]) in
// double for the input gradient, rounded to float as the bias and weight gradients.
template <typename E>
__global__ void backward_sums_kernel(const Stored<E>* x, const Stored<E>* dy, Saved s, double eps,
                                     double* sums, float* diff_weight, float* diff_bias, Planes p) {
  for (size_t c = blockIdx.x; c < p.channels; c += gridDim.x) {
    const double mean = s.mean[c], k = inv_std(s.var[c], eps);
    double sum_dy = 0, sum_dy_xhat = 0;
    for (size_t j = threadIdx.x; j < p.per_channel(); j += blockDim.x) {
      const size_t i = p.at(c, j);
      const double xhat = (static_cast<double>(E::load(x[i])) - mean) * k;
      const auto g = static_cast<double>(E::load(dy[i]));
      sum_dy += g;
      sum_dy_xhat += g * xhat;
    }
    sum_dy = block_sum(sum_dy);
    sum_dy_xhat = block_sum(sum_dy_xhat);
    if (threadIdx.x == 0) {
      sums[c] = sum_dy;
      sums[p.channels + c] = sum_dy_xhat;
      diff_weight[c] = static_cast<float>(sum_dy_xhat);
      diff_bias[c] = static_cast<float>(sum_dy);
    }
  }
}

// dx = weight k (dy - sum dy / n - x_hat sum (dy x_hat) / n), k = 1 / sqrt(var + eps), with the
// (group's) sums and count.
template <typename E>
__global__ void backward_data_kernel(const Stored<E>* x, const Stored<E>* dy, Saved s, double eps,
                                     const float* weight, const double* sums, Stored<E>* dx,
                                     Planes p) {
  const double n = *s.count;
  for (size_t i = first_index(); i < p.elements(); i += grid_stride()) {
    const size_t c = p.channel_of(i);
    const double k = inv_std(s.var[c], eps);
    const double xhat = (static_cast<double>(E::load(x[i])) - s.mean[c]) * k;
    const double g =
        static_cast<double>(E::load(dy[i])) - sums[c] / n - xhat * sums[p.channels + c] / n;
    dx[i] = E::store(static_cast<float>(static_cast<double>(weight[c]) * k * g));
  }
}

Shape shape_of(const BatchNormDesc& d) {
  std::vector<int64_t> dims{d.n, d.channels};
  for (int a = 0; a < d.spatial_rank; ++a) dims.push_back(d.size[static_cast<size_t>(a)]);
  return Shape(dims);
}

size_t spatial_of(const BatchNormDesc& d) {
  size_t spatial = 1;
  for (int a = 0; a < d.spatial_rank; ++a)
    spatial *= static_cast<size_t>(d.size[static_cast<size_t>(a)]);
  return spatial;
}

// The values as the kernels address them: plain [n, channels, spatial], or channels-last as plain
// [n x spatial, channels, 1].
Planes planes_of(const BatchNormDesc& d, Layout layout) {
  const auto n = static_cast<size_t>(d.n), channels = static_cast<size_t>(d.channels);
  if (layout == Layout::channels_last) return {n * spatial_of(d), channels, 1};
  return {n, channels, spatial_of(d)};
}

template <typename E>
class BatchNorm final : public BatchNormKernel {
  using T = Stored<E>;

 public:
  BatchNorm(std::shared_ptr<Context> context, const BatchNormDesc& d, Layout layout)
      : context_(std::move(context)),
        d_(d),
        format_(plain_format(shape_of(d), E::kDType, layout)),
        p_(planes_of(d, layout)),
        post_{d.post_op.kind == EltwiseKind::relu, d.post_op.alpha},
        host_(2 * p_.channels + 1) {}

  MemFormat format() const override { return format_; }
  size_t workspace_bytes() const override { return (2 * p_.channels + 1) * sizeof(double); }
  // Backward's sums of dy and dy * x_hat, kept in double from the reduction to the input
  // gradient.
  size_t scratch_bytes() const override { return 2 * p_.channels * sizeof(double); }

  void forward_training(const void* src, const BatchNormParams& p, void* dst, void* workspace,
                        void* /*scratch*/, BatchStatReducer* reducer) override {
    const auto* x = static_cast<const T*>(src);
    const Saved s = saved(workspace);
    const double n = reducer ? group_statistics(x, s, *reducer) : local_statistics(x, s);
    normalize(x, s.mean, s.var, p, static_cast<T*>(dst));
    update_running_statistics(s, n, p);
  }

  void forward_inference(const void* src, const BatchNormParams& p, void* dst,
                         void* /*scratch*/) override {
    normalize(static_cast<const T*>(src), static_cast<const float*>(p.running_mean),
              static_cast<const float*>(p.running_var), p, static_cast<T*>(dst));
  }

  // The reducer is asked even without diff_src: every rank of the group makes the same calls.
  void backward(const void* src, const void* diff_dst, const BatchNormParams& p,
                const void* workspace, void* diff_src, void* diff_weight, void* diff_bias,
                void* scratch, BatchStatReducer* reducer) override {
    const auto* x = static_cast<const T*>(src);
    const auto* dy = static_cast<const T*>(diff_dst);
    const Saved s = saved(const_cast<void*>(workspace));
    auto* sums = static_cast<double*>(scratch);
    if (p_.channels > 0) {
      backward_sums_kernel<E><<<channel_blocks(), kThreads, 0, stream()>>>(
          x, dy, s, d_.eps, sums, static_cast<float*>(diff_weight), static_cast<float*>(diff_bias),
          p_);
      CREST_CUDA_LAUNCHED();
    }
    if (reducer) reduce_on_host(sums, 2 * p_.channels, *reducer);
    if (!diff_src || p_.elements() == 0) return;
    backward_data_kernel<E><<<grid_for(p_.elements(), kThreads), kThreads, 0, stream()>>>(
        x, dy, s, d_.eps, static_cast<const float*>(p.weight), sums, static_cast<T*>(diff_src), p_);
    CREST_CUDA_LAUNCHED();
  }

 private:
  cudaStream_t stream() const { return context_->stream; }

  Saved saved(void* workspace) const {
    auto* w = static_cast<double*>(workspace);
    return {w, w + p_.channels, w + 2 * p_.channels};
  }

  unsigned channel_blocks() const { return grid_for(p_.channels, 1); }
  double local_count() const { return static_cast<double>(p_.per_channel()); }

  // Mean and biased variance of this rank's batch, without leaving the device.
  double local_statistics(const T* x, const Saved& s) {
    const double n = local_count();
    channel_sums(ValueOf<E>{x}, n, s.mean);
    channel_sums(SquaredDeviation<E>{x, s.mean}, n, s.var);
    store_kernel<<<1, 1, 0, stream()>>>(s.count, n);
    CREST_CUDA_LAUNCHED();
    return n;
  }

  // The group's mean and biased variance, in the reference's sequence: the sums of x with the
  // count reduced first, then the squared deviations from the group's mean (no E[x^2] - mean^2
  // cancellation). The raw sums pass through the workspace before their quotients replace them.
  double group_statistics(const T* x, const Saved& s, BatchStatReducer& reducer) {
    const size_t C = p_.channels;
    channel_sums(ValueOf<E>{x}, 1.0, s.mean);
    download(s.mean, C);
    host_[C] = local_count();
    reducer.allreduce_sum(host_.data(), C + 1);
    const double n = host_[C];
    for (size_t c = 0; c < C; ++c) host_[c] /= n;
    upload(host_.data(), s.mean, C);
    upload(host_.data() + C, s.count, 1);
    channel_sums(SquaredDeviation<E>{x, s.mean}, 1.0, s.var);
    download(s.var, C);
    reducer.allreduce_sum(host_.data(), C);
    for (size_t c = 0; c < C; ++c) host_[c] /= n;
    upload(host_.data(), s.var, C);
    return n;
  }

  template <typename Term>
  void channel_sums(Term term, double divisor, double* out) {
    if (p_.channels == 0) return;
    channel_sums_kernel<<<channel_blocks(), kThreads, 0, stream()>>>(term, p_, divisor, out);
    CREST_CUDA_LAUNCHED();
  }

  template <typename Stat>
  void normalize(const T* x, const Stat* mean, const Stat* var, const BatchNormParams& p, T* y) {
    if (p_.elements() == 0) return;
    normalize_kernel<E><<<grid_for(p_.elements(), kThreads), kThreads, 0, stream()>>>(
        x, mean, var, static_cast<const float*>(p.weight), static_cast<const float*>(p.bias),
        d_.eps, post_, y, p_);
    CREST_CUDA_LAUNCHED();
  }

  // The reference's check and message, on the count the host already knows.
  void update_running_statistics(const Saved& s, double n, const BatchNormParams& p) {
    if (n < 2)
      throw_input(
          "batch_norm in training needs more than one value per channel (batch x spatial "
          "= 1), as PyTorch's BatchNorm does");
    const Running r{static_cast<float*>(p.running_mean), static_cast<float*>(p.running_var),
                    static_cast<float*>(p.num_batches_tracked)};
    const unsigned blocks = grid_for(std::max<size_t>(p_.channels, 1), kThreads);  // the counter
    const auto m = static_cast<float>(d_.momentum);
    update_running_kernel<<<blocks, kThreads, 0, stream()>>>(s, n, m, r, p_.channels);
    CREST_CUDA_LAUNCHED();
  }

  // device[0, count) summed over the group in place, through host_.
  void reduce_on_host(double* device, size_t count, BatchStatReducer& reducer) {
    download(device, count);
    reducer.allreduce_sum(host_.data(), count);
    upload(host_.data(), device, count);
  }

  // host_[0, count) = device[0, count), once the queued work has written it: the reducer and
  // the host's arithmetic read host_ next.
  void download(const double* device, size_t count) {
    if (count == 0) return;
    CREST_CUDA(cudaMemcpyAsync(host_.data(), device, count * sizeof(double), cudaMemcpyDeviceToHost,
                               stream()));
    CREST_CUDA(cudaStreamSynchronize(stream()));
  }

  // Queued in the stream's order; the driver has staged pageable host memory when the call
  // returns, so host_ may be written again at once.
  void upload(const double* host, double* device, size_t count) {
    if (count == 0) return;
    CREST_CUDA(
        cudaMemcpyAsync(device, host, count * sizeof(double), cudaMemcpyHostToDevice, stream()));
  }

  std::shared_ptr<Context> context_;
  BatchNormDesc d_;
  MemFormat format_;
  Planes p_;
  PostOp post_;
  std::vector<double> host_;  // 2C + 1 sums handed to a reducer (sized at creation)
};

std::unique_ptr<BatchNormKernel> make_batch_norm(Backend& backend, const BatchNormDesc& d) {
  if (d.spatial_rank < 1 || d.spatial_rank > 3)
    throw_input("batch_norm spatial rank must be 1, 2 or 3, got " + std::to_string(d.spatial_rank));
  if (d.post_op.kind != EltwiseKind::none && !batch_norm_fuses(d.post_op))
    throw_usage("the cuda backend's batch_norm fuses only relu with slope 0 as its post-op");
  std::unique_ptr<BatchNormKernel> kernel;
  const std::shared_ptr<Context> context = context_of(backend);
  const Layout layout = computed_layout(*context, d.src_hint, d.dtype);
  for_element_type(d.dtype, "batch_norm", [&](auto e) {
    kernel = std::make_unique<BatchNorm<decltype(e)>>(context, d, layout);
  });
  return kernel;
}

}  // namespace

CREST_REGISTER_KERNEL(cuda_batch_norm, "cuda", BatchNormKernel, make_batch_norm);

}  // namespace crest::cuda
