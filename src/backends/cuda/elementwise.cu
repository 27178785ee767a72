// Element-wise CUDA kernels the kernel families share: activations (the reference backend's
// formulas, src/backends/reference/eltwise_math.hpp, evaluated in float32), fills and bias rows.
#include "cuda/check.hpp"
#include "cuda/cuda_kernels.hpp"
#include "cuda/launch.cuh"

namespace crest::cuda {
namespace {

__device__ float activation(EltwiseKind kind, float alpha, float beta, float x) {
  switch (kind) {
    case EltwiseKind::relu:
    case EltwiseKind::leaky_relu:
      return x > 0.f ? x : alpha * x;
    case EltwiseKind::tanh:
      return tanhf(x);
    case EltwiseKind::sigmoid:
      // Two branches so exp never overflows, as the reference computes it.
      if (x >= 0.f) return 1.f / (1.f + expf(-x));
      {
        const float e = expf(x);
        return e / (1.f + e);
      }
    case EltwiseKind::linear:
      return alpha * x + beta;
    default:
      return x;
  }
}

__device__ float derivative_from_dst(EltwiseKind kind, float alpha, float y) {
  switch (kind) {
    case EltwiseKind::relu:
    case EltwiseKind::leaky_relu:
      return y > 0.f ? 1.f : alpha;
    case EltwiseKind::tanh:
      return 1.f - y * y;
    case EltwiseKind::sigmoid:
      return y * (1.f - y);
    case EltwiseKind::linear:
      return alpha;
    default:
      return 1.f;
  }
}

__global__ void forward_kernel(EltwiseKind kind, float alpha, float beta, const float* x, float* y,
                               size_t count) {
  for (size_t i = first_index(); i < count; i += grid_stride())
    y[i] = activation(kind, alpha, beta, x[i]);
}

__global__ void backward_kernel(EltwiseKind kind, float alpha, const float* y, const float* dy,
                                float* dx, size_t count) {
  for (size_t i = first_index(); i < count; i += grid_stride())
    dx[i] = dy[i] * derivative_from_dst(kind, alpha, y[i]);
}

__global__ void fill_kernel(float* x, float value, size_t count) {
  for (size_t i = first_index(); i < count; i += grid_stride()) x[i] = value;
}

__global__ void row_bias_kernel(float* y, const float* bias, size_t rows, size_t columns) {
  const size_t count = rows * columns;
  for (size_t i = first_index(); i < count; i += grid_stride()) y[i] += bias[i % columns];
}

}  // namespace

void eltwise_forward_f32(const EltwiseDesc& d, const float* x, float* y, size_t count,
                         cudaStream_t stream) {
  if (count == 0) return;
  forward_kernel<<<grid_for(count, kThreads), kThreads, 0, stream>>>(d.kind, d.alpha, d.beta, x, y,
                                                                     count);
  CREST_CUDA_LAUNCHED();
}

void eltwise_backward_f32(const EltwiseDesc& d, const float* y, const float* diff_dst,
                          float* diff_src, size_t count, cudaStream_t stream) {
  if (count == 0) return;
  backward_kernel<<<grid_for(count, kThreads), kThreads, 0, stream>>>(d.kind, d.alpha, y, diff_dst,
                                                                      diff_src, count);
  CREST_CUDA_LAUNCHED();
}

void fill_f32(float* x, float value, size_t count, cudaStream_t stream) {
  if (count == 0) return;
  fill_kernel<<<grid_for(count, kThreads), kThreads, 0, stream>>>(x, value, count);
  CREST_CUDA_LAUNCHED();
}

void add_row_bias_f32(float* y, const float* bias, size_t rows, size_t columns,
                      cudaStream_t stream) {
  if (rows * columns == 0) return;
  row_bias_kernel<<<grid_for(rows * columns, kThreads), kThreads, 0, stream>>>(y, bias, rows,
                                                                               columns);
  CREST_CUDA_LAUNCHED();
}

}  // namespace crest::cuda
