// The expand kernel (crest/backends/expand_kernel.hpp) on device memory, float32 or (mixed
// precision) bf16 / fp16: forward broadcasts each of the n x channels values over the spatial
// extent (a copy, bit for bit); backward sums each row of the gradient in double and rounds once,
// as the reference does (reference/expand.cpp). One block per row: each thread adds a strided
// slice, the block combines its threads in a fixed tree, so every run gives the same bits.
#include <algorithm>
#include <string>

#include "crest/backends/expand_kernel.hpp"
#include "cuda/check.hpp"
#include "cuda/cuda_kernels.hpp"
#include "cuda/elements.cuh"
#include "cuda/launch.cuh"

namespace crest::cuda {
namespace {

// y[r, s] = x[r] over rows x spatial elements.
template <typename T>
__global__ void broadcast_kernel(const T* x, T* y, size_t rows, size_t spatial) {
  const size_t count = rows * spatial;
  for (size_t i = size_t{blockIdx.x} * blockDim.x + threadIdx.x; i < count;
       i += size_t{gridDim.x} * blockDim.x)
    y[i] = x[i / spatial];
}

// One block per row: dx[r] = the sum over s of dy[r, s].
template <typename E>
__global__ void row_sum_kernel(const Stored<E>* dy, Stored<E>* dx, size_t rows, size_t spatial) {
  for (size_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const Stored<E>* row = dy + r * spatial;
    double sum = 0;
    for (size_t s = threadIdx.x; s < spatial; s += blockDim.x)
      sum += static_cast<double>(E::load(row[s]));
    sum = block_sum(sum);
    if (threadIdx.x == 0) dx[r] = E::store(static_cast<float>(sum));
  }
}

template <typename E>
class Expand final : public ExpandKernel {
  using T = Stored<E>;

 public:
  Expand(std::shared_ptr<Context> context, const ExpandDesc& d)
      : context_(std::move(context)),
        rows_(static_cast<size_t>(d.n * d.channels)),
        spatial_(static_cast<size_t>(d.spatial)) {}

  void forward(const void* src, void* dst) override {
    if (rows_ * spatial_ == 0) return;
    broadcast_kernel<T><<<grid_for(rows_ * spatial_, kThreads), kThreads, 0, context_->stream>>>(
        static_cast<const T*>(src), static_cast<T*>(dst), rows_, spatial_);
    CREST_CUDA_LAUNCHED();
  }

  // An empty extent still writes zero sums: every row has its block.
  void backward(const void* diff_dst, void* diff_src) override {
    if (rows_ == 0) return;
    row_sum_kernel<E><<<grid_for(rows_, 1), kThreads, 0, context_->stream>>>(
        static_cast<const T*>(diff_dst), static_cast<T*>(diff_src), rows_, spatial_);
    CREST_CUDA_LAUNCHED();
  }

 private:
  std::shared_ptr<Context> context_;
  size_t rows_, spatial_;
};

std::unique_ptr<ExpandKernel> make_expand(Backend& backend, const ExpandDesc& d) {
  std::unique_ptr<ExpandKernel> kernel;
  for_element_type(d.dtype, "expand", [&](auto e) {
    kernel = std::make_unique<Expand<decltype(e)>>(context_of(backend), d);
  });
  return kernel;
}

}  // namespace

CREST_REGISTER_KERNEL(cuda_expand, "cuda", ExpandKernel, make_expand);

}  // namespace crest::cuda
