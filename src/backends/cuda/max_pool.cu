// Max pooling as crest's own kernels (cuDNN keeps average pooling): the forward keeps, per
// output, the number of its maximum's tap in the window (one byte where the window has at most
// 255 taps), and the backward gathers, per input element, the gradients of the windows whose
// maximum it is. cuDNN's max pooling needs the forward's input and output again in backward
// (copies of both in the workspace: 2.3 GB for CosmoFlow's first pool at batch 8) and its
// deterministic backward took 11.5 ms there on an H200.
//
// The reference backend's rules, so results agree bit for bit: padding holds no value (a window
// takes the maximum of its real elements), ties and NaNs keep the first maximum in row-major
// window order (strictly greater replaces), and an input's gradient adds its windows' gradients
// in row-major output order. Values are float32, bf16 or fp16 (elements.cuh), compared and added
// in float: a 16-bit maximum is stored exactly, a gradient sum rounds once. Tensors are plain or
// channels-last; each output's window and each input's windows are visited in the same order in
// both, so both layouts give the same bits.
#include <cstdint>

#include "cuda/check.hpp"
#include "cuda/cuda_kernels.hpp"
#include "cuda/elements.cuh"
#include "cuda/launch.cuh"

namespace crest::cuda {
namespace {

struct Dims {
  int64_t d, h, w;
};

struct Geometry {
  Dims in, out, kernel, stride, pad;  // pad: before each axis
  int64_t channels;
  bool channels_last;
};

// An element's place: its plane (n x channels + c) and spatial position.
struct Position {
  size_t plane;
  int64_t z, y, x;
};

// The position of flat index i of a tensor of extents e.
__device__ Position position_of(const Geometry& g, const Dims& e, size_t i) {
  const auto channels = static_cast<size_t>(g.channels);
  const size_t c = g.channels_last ? i % channels : 0;
  const size_t rest = g.channels_last ? i / channels : i;
  const auto w = static_cast<size_t>(e.w), h = static_cast<size_t>(e.h),
             d = static_cast<size_t>(e.d);
  const size_t outer = rest / w / h / d;  // the plane, or channels-last the sample
  return {g.channels_last ? outer * channels + c : outer, static_cast<int64_t>(rest / w / h % d),
          static_cast<int64_t>(rest / w % h), static_cast<int64_t>(rest % w)};
}

// The flat index of (plane, z, y, x) in a tensor of extents e.
__device__ size_t offset_of(const Geometry& g, const Dims& e, size_t plane, int64_t z, int64_t y,
                            int64_t x) {
  const auto spatial = static_cast<size_t>((z * e.h + y) * e.w + x);
  const auto volume = static_cast<size_t>(e.d * e.h * e.w);
  if (!g.channels_last) return plane * volume + spatial;
  const auto channels = static_cast<size_t>(g.channels);
  return (plane / channels * volume + spatial) * channels + plane % channels;
}

Dims dims(const std::array<int64_t, 3>& v, int rank, int64_t missing) {
  if (rank == 1) return {missing, missing, v[0]};
  if (rank == 2) return {missing, v[0], v[1]};
  return {v[0], v[1], v[2]};
}

template <typename E, typename Tap>
__global__ void max_pool_forward(const Stored<E>* src, Stored<E>* dst, Tap* taps, Geometry g,
                                 size_t count) {
  for (size_t i = first_index(); i < count; i += grid_stride()) {
    const Position o = position_of(g, g.out, i);
    const int64_t od = o.z, oh = o.y, ow = o.x;
    float best = 0.f;
    int64_t best_tap = -1;
    for (int64_t kd = 0; kd < g.kernel.d; ++kd) {
      const int64_t z = od * g.stride.d - g.pad.d + kd;
      if (z < 0 || z >= g.in.d) continue;
      for (int64_t kh = 0; kh < g.kernel.h; ++kh) {
        const int64_t y = oh * g.stride.h - g.pad.h + kh;
        if (y < 0 || y >= g.in.h) continue;
        for (int64_t kw = 0; kw < g.kernel.w; ++kw) {
          const int64_t xw = ow * g.stride.w - g.pad.w + kw;
          if (xw < 0 || xw >= g.in.w) continue;
          const float v = E::load(src[offset_of(g, g.in, o.plane, z, y, xw)]);
          if (best_tap < 0 || v > best) {
            best = v;
            best_tap = (kd * g.kernel.h + kh) * g.kernel.w + kw;
          }
        }
      }
    }
    dst[i] = E::store(best);
    taps[i] = static_cast<Tap>(best_tap);
  }
}

// The outputs whose windows hold input position p along one axis: first .. last (empty when
// first > last).
__device__ void windows_over(int64_t p, int64_t kernel, int64_t stride, int64_t pad, int64_t out,
                             int64_t* first, int64_t* last) {
  const int64_t hi = p + pad;          // o * stride <= p + pad
  const int64_t lo = hi - kernel + 1;  // o * stride >= p + pad - kernel + 1
  *first = lo <= 0 ? 0 : (lo + stride - 1) / stride;
  *last = min(hi / stride, out - 1);
}

template <typename E, typename Tap>
__global__ void max_pool_backward(const Stored<E>* diff_dst, const Tap* taps, Stored<E>* diff_src,
                                  Geometry g, size_t count) {
  for (size_t i = first_index(); i < count; i += grid_stride()) {
    const Position p = position_of(g, g.in, i);
    const int64_t z = p.z, y = p.y, x = p.x;
    int64_t d0, d1, h0, h1, w0, w1;
    windows_over(z, g.kernel.d, g.stride.d, g.pad.d, g.out.d, &d0, &d1);
    windows_over(y, g.kernel.h, g.stride.h, g.pad.h, g.out.h, &h0, &h1);
    windows_over(x, g.kernel.w, g.stride.w, g.pad.w, g.out.w, &w0, &w1);
    float sum = 0.f;
    for (int64_t od = d0; od <= d1; ++od)
      for (int64_t oh = h0; oh <= h1; ++oh)
        for (int64_t ow = w0; ow <= w1; ++ow) {
          const int64_t tap =
              ((z - (od * g.stride.d - g.pad.d)) * g.kernel.h + (y - (oh * g.stride.h - g.pad.h))) *
                  g.kernel.w +
              (x - (ow * g.stride.w - g.pad.w));
          const size_t o = offset_of(g, g.out, p.plane, od, oh, ow);
          if (static_cast<int64_t>(taps[o]) == tap) sum += E::load(diff_dst[o]);
        }
    diff_src[i] = E::store(sum);
  }
}

// Windows that tile the input exactly (kernel = stride, no padding, extents multiples of the
// stride: CosmoFlow's pools): each input element lies in one window, so a thread per window
// writes the window's gradient (0 + dy at the maximum, as the reference adds it to zero, and 0
// elsewhere) with the divisions of one index instead of one per input element.
template <typename E, typename Tap>
__global__ void max_pool_backward_tiled(const Stored<E>* diff_dst, const Tap* taps,
                                        Stored<E>* diff_src, Geometry g, size_t count) {
  for (size_t i = first_index(); i < count; i += grid_stride()) {
    const Position o = position_of(g, g.out, i);
    const int64_t od = o.z, oh = o.y, ow = o.x;
    const auto tap = static_cast<int64_t>(taps[i]);
    const Stored<E> gradient = E::store(0.f + E::load(diff_dst[i])), zero = E::store(0.f);
    for (int64_t kd = 0; kd < g.kernel.d; ++kd)
      for (int64_t kh = 0; kh < g.kernel.h; ++kh)
        for (int64_t kw = 0; kw < g.kernel.w; ++kw) {
          const int64_t z = od * g.kernel.d + kd, y = oh * g.kernel.h + kh,
                        x = ow * g.kernel.w + kw;
          const bool at_max = (kd * g.kernel.h + kh) * g.kernel.w + kw == tap;
          diff_src[offset_of(g, g.in, o.plane, z, y, x)] = at_max ? gradient : zero;
        }
  }
}

bool tiles_exactly(const PoolDesc& d) {
  for (size_t a = 0; a < static_cast<size_t>(d.spatial_rank); ++a)
    if (d.kernel[a] != d.stride[a] || d.pad_lo[a] != 0 || d.pad_hi[a] != 0 ||
        d.in_size[a] != d.out_size[a] * d.stride[a])
      return false;
  return true;
}

Geometry geometry_of(const PoolDesc& d, Layout layout) {
  const int r = d.spatial_rank;
  return {dims(d.in_size, r, 1),          dims(d.out_size, r, 1), dims(d.kernel, r, 1),
          dims(d.stride, r, 1),           dims(d.pad_lo, r, 0),   d.channels,
          layout == Layout::channels_last};
}

size_t elements(const Dims& e, const PoolDesc& d) {
  return static_cast<size_t>(d.n * d.channels * e.d * e.h * e.w);
}

}  // namespace

bool max_pool_taps_fit_a_byte(const PoolDesc& d) {
  int64_t taps = 1;
  for (int a = 0; a < d.spatial_rank; ++a) taps *= d.kernel[static_cast<size_t>(a)];
  return taps <= 255;
}

namespace {

// The launches for element type E and tap type Tap.
template <typename E, typename Tap>
void forward_with(const Geometry& g, const void* src, void* dst, void* taps, size_t count,
                  cudaStream_t stream) {
  max_pool_forward<E, Tap><<<grid_for(count, kThreads), kThreads, 0, stream>>>(
      static_cast<const Stored<E>*>(src), static_cast<Stored<E>*>(dst), static_cast<Tap*>(taps), g,
      count);
}

template <typename E, typename Tap>
void backward_with(const Geometry& g, bool tiled, const void* diff_dst, const void* taps,
                   void* diff_src, size_t count, cudaStream_t stream) {
  const auto* dy = static_cast<const Stored<E>*>(diff_dst);
  auto* dx = static_cast<Stored<E>*>(diff_src);
  const auto* t = static_cast<const Tap*>(taps);
  if (tiled)
    max_pool_backward_tiled<E, Tap>
        <<<grid_for(count, kThreads), kThreads, 0, stream>>>(dy, t, dx, g, count);
  else
    max_pool_backward<E, Tap>
        <<<grid_for(count, kThreads), kThreads, 0, stream>>>(dy, t, dx, g, count);
}

}  // namespace

void max_pool_forward(const PoolDesc& d, Layout layout, const void* src, void* dst, void* taps,
                      cudaStream_t stream) {
  const Geometry g = geometry_of(d, layout);
  const size_t count = elements(g.out, d);
  if (count == 0) return;
  for_element_type(d.dtype, "max pooling", [&](auto e) {
    using E = decltype(e);
    if (max_pool_taps_fit_a_byte(d))
      forward_with<E, uint8_t>(g, src, dst, taps, count, stream);
    else
      forward_with<E, int32_t>(g, src, dst, taps, count, stream);
  });
  CREST_CUDA_LAUNCHED();
}

// Where the windows tile the input, a thread per window (output); else a thread per input.
void max_pool_backward(const PoolDesc& d, Layout layout, const void* diff_dst, const void* taps,
                       void* diff_src, cudaStream_t stream) {
  const Geometry g = geometry_of(d, layout);
  const bool tiled = tiles_exactly(d);
  const size_t count = tiled ? elements(g.out, d) : elements(g.in, d);
  if (count == 0) return;
  for_element_type(d.dtype, "max pooling", [&](auto e) {
    using E = decltype(e);
    if (max_pool_taps_fit_a_byte(d))
      backward_with<E, uint8_t>(g, tiled, diff_dst, taps, diff_src, count, stream);
    else
      backward_with<E, int32_t>(g, tiled, diff_dst, taps, diff_src, count, stream);
  });
  CREST_CUDA_LAUNCHED();
}

}  // namespace crest::cuda
