// The reorder between plain (N, C, spatial) and channels-last (N, spatial, C) layouts: per
// sample, a transpose of a C x S matrix, of raw elements or converting between float32 and a
// 16-bit type on the way (a mixed-precision network's first input). Tiles of 32 x 32 go through
// shared memory so that both the reads and the writes of a warp touch consecutive addresses.
#include <cstdint>

#include "cuda/check.hpp"
#include "cuda/cuda_kernels.hpp"
#include "cuda/elements.cuh"
#include "cuda/launch.cuh"

namespace crest::cuda {
namespace {

constexpr unsigned kTile = 32;
constexpr unsigned kTileRows = 8;  // a block is kTile x kTileRows threads

// A raw element's move: the tile holds it as it is.
template <typename T>
struct Raw {
  using Storage = T;
  using Tile = T;
  __device__ static T load(T v) { return v; }
  __device__ static T store(T v) { return v; }
};

// An element read as From and written as To: the tile holds floats.
template <typename From, typename To>
struct Converting {
  using Storage = Stored<From>;
  using Tile = float;
  __device__ static float load(Stored<From> v) { return From::load(v); }
  __device__ static Stored<To> store(float v) { return To::store(v); }
};

// dst[b][c][r] = src[b][r][c] for `batch` matrices of rows x cols; blocks loop over the tiles.
template <typename Move, typename Out>
__global__ void transpose_tiles(const typename Move::Storage* src, Out* dst, size_t rows,
                                size_t cols, size_t batch) {
  using T = typename Move::Tile;
  __shared__ T tile[kTile][kTile + 1];  // +1: a column read hits 32 different banks
  const size_t tiles_r = (rows + kTile - 1) / kTile, tiles_c = (cols + kTile - 1) / kTile;
  const size_t tiles = batch * tiles_r * tiles_c, matrix = rows * cols;
  for (size_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const size_t b = t / (tiles_r * tiles_c);
    const size_t r0 = t / tiles_c % tiles_r * kTile, c0 = t % tiles_c * kTile;
    const typename Move::Storage* s = src + b * matrix;
    Out* d = dst + b * matrix;
    for (unsigned k = threadIdx.y; k < kTile; k += kTileRows) {
      const size_t r = r0 + k, c = c0 + threadIdx.x;
      if (r < rows && c < cols) tile[k][threadIdx.x] = Move::load(s[r * cols + c]);
    }
    __syncthreads();
    for (unsigned k = threadIdx.y; k < kTile; k += kTileRows) {
      const size_t c = c0 + k, r = r0 + threadIdx.x;
      if (r < rows && c < cols) d[c * rows + r] = Move::store(tile[threadIdx.x][k]);
    }
    __syncthreads();  // the tile is read before the next one overwrites it
  }
}

template <typename Move, typename Out>
void launch_moves(const void* src, void* dst, size_t batch, size_t rows, size_t cols,
                  cudaStream_t stream) {
  const size_t tiles = batch * ((rows + kTile - 1) / kTile) * ((cols + kTile - 1) / kTile);
  transpose_tiles<Move, Out><<<grid_for(tiles, 1), dim3(kTile, kTileRows), 0, stream>>>(
      static_cast<const typename Move::Storage*>(src), static_cast<Out*>(dst), rows, cols, batch);
  CREST_CUDA_LAUNCHED();
}

template <typename T>
void launch(const void* src, void* dst, size_t batch, size_t rows, size_t cols,
            cudaStream_t stream) {
  launch_moves<Raw<T>, T>(src, dst, batch, rows, cols, stream);
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

void transpose_converting(const void* src, DType from, void* dst, DType to, size_t batch,
                          size_t rows, size_t cols, cudaStream_t stream) {
  if (batch * rows * cols == 0) return;
  for_element_type(from, "reorders", [&](auto f) {
    for_element_type(to, "reorders", [&](auto t) {
      using Move = Converting<decltype(f), decltype(t)>;
      launch_moves<Move, Stored<decltype(t)>>(src, dst, batch, rows, cols, stream);
    });
  });
}

}  // namespace crest::cuda
