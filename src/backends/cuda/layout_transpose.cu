// The reorder between plain (N, C, spatial) and channels-last (N, spatial, C) layouts: per
// sample, a transpose of a C x S matrix. Tiles of 32 x 32 go through shared memory so that both
// the reads and the writes of a warp touch consecutive addresses.
#include <cstdint>

#include "cuda/check.hpp"
#include "cuda/cuda_kernels.hpp"
#include "cuda/launch.cuh"

namespace crest::cuda {
namespace {

constexpr unsigned kTile = 32;
constexpr unsigned kTileRows = 8;  // a block is kTile x kTileRows threads

// dst[b][c][r] = src[b][r][c] for `batch` matrices of rows x cols; blocks loop over the tiles.
template <typename T>
__global__ void transpose_tiles(const T* src, T* dst, size_t rows, size_t cols, size_t batch) {
  __shared__ T tile[kTile][kTile + 1];  // +1: a column read hits 32 different banks
  const size_t tiles_r = (rows + kTile - 1) / kTile, tiles_c = (cols + kTile - 1) / kTile;
  const size_t tiles = batch * tiles_r * tiles_c, matrix = rows * cols;
  for (size_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const size_t b = t / (tiles_r * tiles_c);
    const size_t r0 = t / tiles_c % tiles_r * kTile, c0 = t % tiles_c * kTile;
    const T* s = src + b * matrix;
    T* d = dst + b * matrix;
    for (unsigned k = threadIdx.y; k < kTile; k += kTileRows) {
      const size_t r = r0 + k, c = c0 + threadIdx.x;
      if (r < rows && c < cols) tile[k][threadIdx.x] = s[r * cols + c];
    }
    __syncthreads();
    for (unsigned k = threadIdx.y; k < kTile; k += kTileRows) {
      const size_t c = c0 + k, r = r0 + threadIdx.x;
      if (r < rows && c < cols) d[c * rows + r] = tile[threadIdx.x][k];
    }
    __syncthreads();  // the tile is read before the next one overwrites it
  }
}

template <typename T>
void launch(const void* src, void* dst, size_t batch, size_t rows, size_t cols,
            cudaStream_t stream) {
  const size_t tiles = batch * ((rows + kTile - 1) / kTile) * ((cols + kTile - 1) / kTile);
  transpose_tiles<T><<<grid_for(tiles, 1), dim3(kTile, kTileRows), 0, stream>>>(
      static_cast<const T*>(src), static_cast<T*>(dst), rows, cols, batch);
  CREST_CUDA_LAUNCHED();
}

}  // namespace

void transpose_batched(const void* src, void* dst, size_t batch, size_t rows, size_t cols,
                       size_t element_bytes, cudaStream_t stream) {
  if (batch * rows * cols == 0) return;
  switch (element_bytes) {
    case 1:
      return launch<uint8_t>(src, dst, batch, rows, cols, stream);
    case 2:
      return launch<uint16_t>(src, dst, batch, rows, cols, stream);
    case 4:
      return launch<uint32_t>(src, dst, batch, rows, cols, stream);
    case 8:
      return launch<uint64_t>(src, dst, batch, rows, cols, stream);
    default:
      throw_runtime("transpose_batched: no kernel for " + std::to_string(element_bytes) +
                    "-byte elements");
  }
}

}  // namespace crest::cuda
