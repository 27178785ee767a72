// The channel_sum kernel (crest/backends/channel_sum_kernel.hpp) on device memory, and the
// per-channel sums the convolutions' and dense layers' bias gradients are: [N, C, spatial...]
// tensors of float32, bf16 or fp16 (channels-last ones as plain [N x spatial, C, 1]: the same
// values in the same order), summed per channel in double as the reference
// sums them (reference/channel_sum.cpp) and rounded to float once. One block per channel: each
// thread adds a strided slice of the channel's values, the block combines its threads in a fixed
// tree, so every run gives the same bits (not the reference's: its loop adds one value after
// another).
#include <algorithm>
#include <string>

#include "crest/backends/channel_sum_kernel.hpp"
#include "cuda/check.hpp"
#include "cuda/cuda_kernels.hpp"
#include "cuda/elements.cuh"
#include "cuda/launch.cuh"

namespace crest::cuda {
namespace {

// sums[c] = the sum of plain [n, channels, spatial] x over n and spatial.
template <typename E>
__global__ void channel_sum_kernel(const Stored<E>* x, float* sums, Planes p) {
  for (size_t c = blockIdx.x; c < p.channels; c += gridDim.x) {
    double sum = 0;
    for (size_t j = threadIdx.x; j < p.per_channel(); j += blockDim.x)
      sum += static_cast<double>(E::load(x[p.at(c, j)]));
    sum = block_sum(sum);
    if (threadIdx.x == 0) sums[c] = static_cast<float>(sum);
  }
}

class ChannelSum final : public ChannelSumKernel {
 public:
  ChannelSum(std::shared_ptr<Context> context, const MemFormat& f)
      : context_(std::move(context)),
        dtype_(f.dtype),
        n_(static_cast<size_t>(f.shape[0])),
        channels_(static_cast<size_t>(f.shape[1])),
        spatial_(1) {
    for (int a = 2; a < f.shape.rank(); ++a) spatial_ *= static_cast<size_t>(f.shape[a]);
    if (f.layout == Layout::channels_last) {
      n_ *= spatial_;
      spatial_ = 1;
    }
  }

  void run(const void* src, void* sums) override {
    channel_sums(dtype_, src, static_cast<float*>(sums), n_, channels_, spatial_, context_->stream);
  }

 private:
  std::shared_ptr<Context> context_;
  DType dtype_;
  size_t n_, channels_, spatial_;
};

std::unique_ptr<ChannelSumKernel> make_channel_sum(Backend& backend, const ChannelSumDesc& d) {
  const MemFormat& f = d.format;
  if (f.layout != Layout::plain && f.layout != Layout::channels_last)
    throw_usage("the cuda backend's channel_sum runs plain or channels-last tensors, not " +
                f.str());
  if (f.shape.rank() < 2)
    throw_usage(
        "the cuda backend's channel_sum takes [N, C, spatial...] tensors of rank >= 2, not " +
        f.str());
  for_element_type(f.dtype, "channel_sum", [](auto) {});  // refuses another dtype
  return std::make_unique<ChannelSum>(context_of(backend), f);
}

}  // namespace

// Channels without values (n or spatial 0) still get their zero: every channel has its block.
void channel_sums(DType dtype, const void* x, float* sums, size_t n, size_t channels,
                  size_t spatial, cudaStream_t stream) {
  if (channels == 0) return;
  const Planes p{n, channels, spatial};
  const auto blocks = static_cast<unsigned>(std::min(channels, kMaxBlocks));
  for_element_type(dtype, "channel sums", [&](auto e) {
    using E = decltype(e);
    channel_sum_kernel<E>
        <<<blocks, kThreads, 0, stream>>>(static_cast<const Stored<E>*>(x), sums, p);
  });
  CREST_CUDA_LAUNCHED();
}

CREST_REGISTER_KERNEL(cuda_channel_sum, "cuda", ChannelSumKernel, make_channel_sum);

}  // namespace crest::cuda
