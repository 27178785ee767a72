// The channel_sum kernel (crest/backends/channel_sum_kernel.hpp) on device memory: float32 plain
// [N, C, spatial...] tensors, summed per channel in double as the reference sums them
// (reference/channel_sum.cpp) and rounded to float once. One block per channel: each thread adds
// a strided slice of the channel's values, the block combines its threads in a fixed tree, so
// every run gives the same bits (not the reference's: its loop adds one value after another).
#include <algorithm>
#include <string>

#include "crest/backends/channel_sum_kernel.hpp"
#include "cuda/check.hpp"
#include "cuda/cuda_kernels.hpp"
#include "cuda/launch.cuh"

namespace crest::cuda {
namespace {

// sums[c] = the sum of plain [n, channels, spatial] x over n and spatial.
__global__ void channel_sum_kernel(const float* x, float* sums, size_t n, size_t channels,
                                   size_t spatial) {
  const size_t per_channel = n * spatial;
  for (size_t c = blockIdx.x; c < channels; c += gridDim.x) {
    double sum = 0;
    for (size_t j = threadIdx.x; j < per_channel; j += blockDim.x)
      sum += static_cast<double>(x[(j / spatial * channels + c) * spatial + j % spatial]);
    sum = block_sum(sum);
    if (threadIdx.x == 0) sums[c] = static_cast<float>(sum);
  }
}

class ChannelSum final : public ChannelSumKernel {
 public:
  ChannelSum(std::shared_ptr<Context> context, const Shape& shape)
      : context_(std::move(context)),
        n_(static_cast<size_t>(shape[0])),
        channels_(static_cast<size_t>(shape[1])),
        spatial_(1) {
    for (int a = 2; a < shape.rank(); ++a) spatial_ *= static_cast<size_t>(shape[a]);
  }

  // Channels without values (n or spatial 0) still get their zero: every channel has its block.
  void run(const void* src, void* sums) override {
    if (channels_ == 0) return;
    const auto blocks = static_cast<unsigned>(std::min(channels_, kMaxBlocks));
    channel_sum_kernel<<<blocks, kThreads, 0, context_->stream>>>(
        static_cast<const float*>(src), static_cast<float*>(sums), n_, channels_, spatial_);
    CREST_CUDA_LAUNCHED();
  }

 private:
  std::shared_ptr<Context> context_;
  size_t n_, channels_, spatial_;
};

std::unique_ptr<ChannelSumKernel> make_channel_sum(Backend& backend, const ChannelSumDesc& d) {
  const MemFormat& f = d.format;
  if (f.dtype != DType::f32 || f.layout != Layout::plain)
    throw_usage("the cuda backend's channel_sum runs float32 plain tensors only, not " + f.str());
  if (f.shape.rank() < 2)
    throw_usage(
        "the cuda backend's channel_sum takes [N, C, spatial...] tensors of rank >= 2, not " +
        f.str());
  return std::make_unique<ChannelSum>(context_of(backend), f.shape);
}

}  // namespace

CREST_REGISTER_KERNEL(cuda_channel_sum, "cuda", ChannelSumKernel, make_channel_sum);

}  // namespace crest::cuda
