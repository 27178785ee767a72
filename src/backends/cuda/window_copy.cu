// Copies between a plain tensor and a larger or smaller one of the same planes: the padded
// extension a convolution or pooling with unequal padding runs on (cuDNN pads both sides of an
// axis alike), and the crop back out of it.
#include "cuda/check.hpp"
#include "cuda/cuda_kernels.hpp"
#include "cuda/elements.cuh"
#include "cuda/launch.cuh"

namespace crest::cuda {
namespace {

struct Extents {
  int64_t d, h, w;
};

// dst[plane, z, y, x] = src[plane, z - offset.d, y - offset.h, x - offset.w] where that lies in
// src, else `fill`.
template <typename T>
__global__ void window_kernel(const T* src, Extents from, T* dst, Extents to, Extents offset,
                              T fill, size_t count) {
  for (size_t i = first_index(); i < count; i += grid_stride()) {
    const auto x = static_cast<int64_t>(i % to.w);
    const auto y = static_cast<int64_t>(i / to.w % to.h);
    const auto z = static_cast<int64_t>(i / to.w / to.h % to.d);
    const size_t plane = i / to.w / to.h / to.d;
    const int64_t sx = x - offset.w, sy = y - offset.h, sz = z - offset.d;
    const bool inside = sx >= 0 && sx < from.w && sy >= 0 && sy < from.h && sz >= 0 && sz < from.d;
    dst[i] = inside ? src[((plane * from.d + sz) * from.h + sy) * from.w + sx] : fill;
  }
}

// The first `rank` values of `v` as the last axes of (d, h, w); an axis the tensor lacks gets
// `missing`: extent 1, offset 0.
Extents trailing_axes(const std::array<int64_t, 3>& v, int rank, int64_t missing) {
  Extents e{missing, missing, missing};
  if (rank == 1) e.w = v[0];
  if (rank == 2) e = {missing, v[0], v[1]};
  if (rank == 3) e = {v[0], v[1], v[2]};
  return e;
}
Extents extents_of(const std::array<int64_t, 3>& size, int rank) {
  return trailing_axes(size, rank, 1);
}
Extents offsets_of(const std::array<int64_t, 3>& offset, int rank) {
  return trailing_axes(offset, rank, 0);
}

}  // namespace

PaddingExtension padding_extension(const std::array<int64_t, 3>& size,
                                   const std::array<int64_t, 3>& pad_lo,
                                   const std::array<int64_t, 3>& pad_hi, int spatial_rank) {
  PaddingExtension e;
  e.size = size;
  for (size_t a = 0; a < static_cast<size_t>(spatial_rank); ++a) {
    e.common[a] = pad_lo[a] < pad_hi[a] ? pad_lo[a] : pad_hi[a];
    e.offset[a] = pad_lo[a] - e.common[a];
    e.size[a] += pad_lo[a] + pad_hi[a] - 2 * e.common[a];
    e.extended = e.extended || e.size[a] != size[a];
  }
  return e;
}

void copy_window(DType dtype, const void* src, const std::array<int64_t, 3>& from, void* dst,
                 const std::array<int64_t, 3>& to, const std::array<int64_t, 3>& offset,
                 int spatial_rank, size_t planes, cudaStream_t stream, float fill) {
  const Extents t = extents_of(to, spatial_rank);
  const size_t count = planes * static_cast<size_t>(t.d * t.h * t.w);
  if (count == 0) return;
  for_element_type(dtype, "padding copies", [&](auto e) {
    using T = Stored<decltype(e)>;
    window_kernel<T><<<grid_for(count, kThreads), kThreads, 0, stream>>>(
        static_cast<const T*>(src), extents_of(from, spatial_rank), static_cast<T*>(dst), t,
        offsets_of(offset, spatial_rank), decltype(e)::store(fill), count);
  });
  CREST_CUDA_LAUNCHED();
}

}  // namespace crest::cuda
