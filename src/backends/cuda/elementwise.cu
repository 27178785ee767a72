// Element-wise CUDA kernels the kernel families share: activations (the reference backend's
// formulas, src/backends/reference/eltwise_math.hpp, evaluated in float32), conversions between
// float32 and the 16-bit types, and per-channel biases. Each runs on float32, bf16 or fp16
// values (elements.cuh): a 16-bit value is widened to float, computed on, and rounded once, as
// the reference backend's emulation of a 16-bit kernel rounds it.
#include "cuda/check.hpp"
#include "cuda/cuda_kernels.hpp"
#include "cuda/elements.cuh"
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

template <typename E>
__global__ void forward_kernel(EltwiseKind kind, float alpha, float beta, const Stored<E>* x,
                               Stored<E>* y, size_t count) {
  for (size_t i = first_index(); i < count; i += grid_stride())
    y[i] = E::store(activation(kind, alpha, beta, E::load(x[i])));
}

template <typename E>
__global__ void backward_kernel(EltwiseKind kind, float alpha, const Stored<E>* y,
                                const Stored<E>* dy, Stored<E>* dx, size_t count) {
  for (size_t i = first_index(); i < count; i += grid_stride())
    dx[i] = E::store(E::load(dy[i]) * derivative_from_dst(kind, alpha, E::load(y[i])));
}

template <typename From, typename To>
__global__ void convert_kernel(const Stored<From>* src, Stored<To>* dst, size_t count) {
  for (size_t i = first_index(); i < count; i += grid_stride())
    dst[i] = To::store(From::load(src[i]));
}

template <typename E>
__global__ void channel_bias_kernel(Stored<E>* y, const float* bias, Planes p) {
  for (size_t i = first_index(); i < p.elements(); i += grid_stride())
    y[i] = E::store(E::load(y[i]) + bias[p.channel_of(i)]);
}

}  // namespace

void eltwise_forward(const EltwiseDesc& d, DType dtype, const void* x, void* y, size_t count,
                     cudaStream_t stream) {
  if (count == 0) return;
  for_element_type(dtype, "activations", [&](auto e) {
    using E = decltype(e);
    forward_kernel<E><<<grid_for(count, kThreads), kThreads, 0, stream>>>(
        d.kind, d.alpha, d.beta, static_cast<const Stored<E>*>(x), static_cast<Stored<E>*>(y),
        count);
  });
  CREST_CUDA_LAUNCHED();
}

void eltwise_backward(const EltwiseDesc& d, DType dtype, const void* y, const void* diff_dst,
                      void* diff_src, size_t count, cudaStream_t stream) {
  if (count == 0) return;
  for_element_type(dtype, "activations", [&](auto e) {
    using E = decltype(e);
    backward_kernel<E><<<grid_for(count, kThreads), kThreads, 0, stream>>>(
        d.kind, d.alpha, static_cast<const Stored<E>*>(y), static_cast<const Stored<E>*>(diff_dst),
        static_cast<Stored<E>*>(diff_src), count);
  });
  CREST_CUDA_LAUNCHED();
}

void convert_elements(DType from, const void* src, DType to, void* dst, size_t count,
                      cudaStream_t stream) {
  if (count == 0) return;
  for_element_type(from, "conversions", [&](auto f) {
    for_element_type(to, "conversions", [&](auto t) {
      using From = decltype(f);
      using To = decltype(t);
      convert_kernel<From, To><<<grid_for(count, kThreads), kThreads, 0, stream>>>(
          static_cast<const Stored<From>*>(src), static_cast<Stored<To>*>(dst), count);
    });
  });
  CREST_CUDA_LAUNCHED();
}

void add_channel_bias(DType dtype, void* y, const float* bias, size_t n, size_t channels,
                      size_t spatial, cudaStream_t stream) {
  const Planes p{n, channels, spatial};
  if (p.elements() == 0) return;
  for_element_type(dtype, "biases", [&](auto e) {
    using E = decltype(e);
    channel_bias_kernel<E><<<grid_for(p.elements(), kThreads), kThreads, 0, stream>>>(
        static_cast<Stored<E>*>(y), bias, p);
  });
  CREST_CUDA_LAUNCHED();
}

}  // namespace crest::cuda
