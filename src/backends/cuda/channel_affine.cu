// The channel_affine kernel (crest/backends/channel_affine_kernel.hpp) on device memory: plain
// [n, channels, spatial] values of float32, or bf16 / fp16 under mixed precision (read as float,
// each result rounded once; scale, shift and their gradients float32), the reference's formulas
// (reference/channel_affine.cpp) element by element. The weight gradients are per-channel
// reductions: one block per channel, each thread adding a strided slice of the channel's values in
// double, the block combining its threads in a fixed tree, so every run gives the same bits. The
// reference accumulates them in float, one value after another; double keeps this kernel within the
// reference's own rounding of that sum.
#include <algorithm>
#include <string>

#include "crest/backends/channel_affine_kernel.hpp"
#include "cuda/check.hpp"
#include "cuda/cuda_kernels.hpp"
#include "cuda/elements.cuh"
#include "cuda/launch.cuh"

namespace crest::cuda {
namespace {

// shift null: none. Adding 0.f without a shift is the reference's formula (it turns -0 into +0).
template <typename E>
__global__ void forward_kernel(const Stored<E>* x, const float* scale, const float* shift,
                               Stored<E>* y, Planes p) {
  for (size_t i = first_index(); i < p.elements(); i += grid_stride()) {
    const size_t c = p.channel_of(i);
    y[i] = E::store(scale[c] * E::load(x[i]) + (shift ? shift[c] : 0.f));
  }
}

template <typename E>
__global__ void backward_data_kernel(const Stored<E>* dy, const float* scale, Stored<E>* dx,
                                     Planes p) {
  for (size_t i = first_index(); i < p.elements(); i += grid_stride())
    dx[i] = E::store(scale[p.channel_of(i)] * E::load(dy[i]));
}

// One block per channel: dscale[c] = sum dy * x (each product in float, as the reference forms
// it), dshift[c] = sum dy (dshift null: none).
template <typename E>
__global__ void weight_grad_kernel(const Stored<E>* x, const Stored<E>* dy, float* dscale,
                                   float* dshift, Planes p) {
  for (size_t c = blockIdx.x; c < p.channels; c += gridDim.x) {
    double dy_x = 0, dy_sum = 0;
    for (size_t j = threadIdx.x; j < p.per_channel(); j += blockDim.x) {
      const size_t i = p.at(c, j);
      const float g = E::load(dy[i]);
      dy_x += static_cast<double>(g * E::load(x[i]));
      dy_sum += static_cast<double>(g);
    }
    dy_x = block_sum(dy_x);
    dy_sum = block_sum(dy_sum);
    if (threadIdx.x == 0) {
      dscale[c] = static_cast<float>(dy_x);
      if (dshift) dshift[c] = static_cast<float>(dy_sum);
    }
  }
}

template <typename E>
class ChannelAffine final : public ChannelAffineKernel {
  using T = Stored<E>;

 public:
  ChannelAffine(std::shared_ptr<Context> context, const ChannelAffineDesc& d)
      : context_(std::move(context)),
        p_{static_cast<size_t>(d.n), static_cast<size_t>(d.channels),
           static_cast<size_t>(d.spatial)},
        shift_(d.shift) {}

  void forward(const void* src, const void* scale, const void* shift, void* dst) override {
    if (p_.elements() == 0) return;
    forward_kernel<E><<<grid_for(p_.elements(), kThreads), kThreads, 0, stream()>>>(
        static_cast<const T*>(src), static_cast<const float*>(scale),
        shift_ ? static_cast<const float*>(shift) : nullptr, static_cast<T*>(dst), p_);
    CREST_CUDA_LAUNCHED();
  }

  void backward_data(const void* diff_dst, const void* scale, void* diff_src) override {
    if (p_.elements() == 0) return;
    backward_data_kernel<E><<<grid_for(p_.elements(), kThreads), kThreads, 0, stream()>>>(
        static_cast<const T*>(diff_dst), static_cast<const float*>(scale),
        static_cast<T*>(diff_src), p_);
    CREST_CUDA_LAUNCHED();
  }

  // Empty channels still get their zero gradients: every channel has its block.
  void backward_weights(const void* src, const void* diff_dst, void* diff_scale,
                        void* diff_shift) override {
    if (p_.channels == 0) return;
    weight_grad_kernel<E><<<grid_for(p_.channels, 1), kThreads, 0, stream()>>>(
        static_cast<const T*>(src), static_cast<const T*>(diff_dst),
        static_cast<float*>(diff_scale), shift_ ? static_cast<float*>(diff_shift) : nullptr, p_);
    CREST_CUDA_LAUNCHED();
  }

 private:
  cudaStream_t stream() const { return context_->stream; }

  std::shared_ptr<Context> context_;
  Planes p_;
  bool shift_;
};

std::unique_ptr<ChannelAffineKernel> make_channel_affine(Backend& backend,
                                                         const ChannelAffineDesc& d) {
  std::unique_ptr<ChannelAffineKernel> kernel;
  for_element_type(d.dtype, "channel_affine", [&](auto e) {
    kernel = std::make_unique<ChannelAffine<decltype(e)>>(context_of(backend), d);
  });
  return kernel;
}

}  // namespace

CREST_REGISTER_KERNEL(cuda_channel_affine, "cuda", ChannelAffineKernel, make_channel_affine);

}  // namespace crest::cuda
