// Private to the CUDA backend: the launch shape every kernel of the backend uses and the
// pieces its kernels share. Every launch has kThreads threads per block (block_sum's tree
// assumes it) and at most kMaxBlocks blocks; larger work loops over the grid (grid-stride).
// Sums are formed in a fixed order (no floating-point atomics), so a run repeats bit for bit.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace crest::cuda {

inline constexpr unsigned kThreads = 256;
inline constexpr size_t kMaxBlocks = size_t{1} << 16;

// Blocks for `items` work items, `per_block` per block, capped at kMaxBlocks.
inline unsigned grid_for(size_t items, size_t per_block) {
  return static_cast<unsigned>(std::min((items + per_block - 1) / per_block, kMaxBlocks));
}

inline __device__ size_t first_index() { return size_t{blockIdx.x} * blockDim.x + threadIdx.x; }
inline __device__ size_t grid_stride() { return size_t{gridDim.x} * blockDim.x; }

// The block's values added in a fixed tree; every thread gets the total.
inline __device__ double block_sum(double value) {
  __shared__ double lanes[kThreads];
  lanes[threadIdx.x] = value;
  __syncthreads();
  for (unsigned stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) lanes[threadIdx.x] += lanes[threadIdx.x + stride];
    __syncthreads();
  }
  const double total = lanes[0];
  __syncthreads();  // all have read lanes[0] before a next call overwrites it
  return total;
}

// Plain [n, channels, spatial]: the flat index of channel c's j-th value (j over n, then space).
// Where every index fits 32 bits the divisions are 32-bit ones (a 64-bit division takes several
// times the instructions, and these run once per element); the indices are the same either way.
struct Planes {
  size_t n, channels, spatial;
  __host__ __device__ size_t elements() const { return n * channels * spatial; }
  __host__ __device__ size_t per_channel() const { return n * spatial; }
  __host__ __device__ bool fits_32_bits() const { return elements() <= UINT32_MAX; }
  __device__ size_t channel_of(size_t i) const {
    if (fits_32_bits())
      return static_cast<uint32_t>(i) / static_cast<uint32_t>(spatial) %
             static_cast<uint32_t>(channels);
    return i / spatial % channels;
  }
  __device__ size_t at(size_t c, size_t j) const {
    if (fits_32_bits()) {
      const auto s = static_cast<uint32_t>(spatial), k = static_cast<uint32_t>(j);
      return (k / s * static_cast<uint32_t>(channels) + static_cast<uint32_t>(c)) * s + k % s;
    }
    return (j / spatial * channels + c) * spatial + j % spatial;
  }
};

}  // namespace crest::cuda
