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
//
// Index arithmetic runs in 32 bits where every index of both tensors fits (CosmoFlow's first pool
// at 128^3 and batch 8: 537M inputs), in 64 bits beyond: decoding an element's position takes a
// division per axis, and a 64-bit division several times a 32-bit one's instructions (the 64-bit
// forward and backward of that pool took about ten times their memory-bound time on an H200).
#include <cstdint>

#include "cuda/check.hpp"
#include "cuda/cuda_kernels.hpp"
#include "cuda/elements.cuh"
#include "cuda/launch.cuh"

namespace crest::cuda {
namespace {

template <typename I>
struct Dims {
  I d, h, w;
};

template <typename I>
struct Geometry {
  Dims<I> in, out, kernel, stride, pad;  // pad: before each axis
  I channels;
  bool channels_last;
};

// An element's place: its plane (n x channels + c) and spatial position.
template <typename I>
struct Position {
  I plane;
  I z, y, x;
};

// The position of flat index i of a tensor of extents e.
template <typename I>
__device__ Position<I> position_of(const Geometry<I>& g, const Dims<I>& e, I i) {
  const I c = g.channels_last ? i % g.channels : 0;
  const I rest = g.channels_last ? i / g.channels : i;
  const I outer = rest / e.w / e.h / e.d;  // the plane, or channels-last the sample
  return {g.channels_last ? outer * g.channels + c : outer, rest / e.w / e.h % e.d,
          rest / e.w % e.h, rest % e.w};
}

// The flat index of (plane, z, y, x) in a tensor of extents e.
template <typename I>
__device__ I offset_of(const Geometry<I>& g, const Dims<I>& e, I plane, I z, I y, I x) {
  const I spatial = (z * e.h + y) * e.w + x;
  const I volume = e.d * e.h * e.w;
  if (!g.channels_last) return plane * volume + spatial;
  return (plane / g.channels * volume + spatial) * g.channels + plane % g.channels;
}

template <typename I>
Dims<I> dims(const std::array<int64_t, 3>& v, int rank, I missing) {
  const auto at = [&](size_t a) { return static_cast<I>(v[a]); };
  if (rank == 1) return {missing, missing, at(0)};
  if (rank == 2) return {missing, at(0), at(1)};
  return {at(0), at(1), at(2)};
}

template <typename E, typename Tap, typename I>
__global__ void max_pool_forward(const Stored<E>* src, Stored<E>* dst, Tap* taps, Geometry<I> g,
                                 size_t count) {
  for (size_t i = first_index(); i < count; i += grid_stride()) {
    const Position<I> o = position_of(g, g.out, static_cast<I>(i));
    const I od = o.z, oh = o.y, ow = o.x;
    float best = 0.f;
    I best_tap = -1;
    for (I kd = 0; kd < g.kernel.d; ++kd) {
      const I z = od * g.stride.d - g.pad.d + kd;
      if (z < 0 || z >= g.in.d) continue;
      for (I kh = 0; kh < g.kernel.h; ++kh) {
        const I y = oh * g.stride.h - g.pad.h + kh;
        if (y < 0 || y >= g.in.h) continue;
        for (I kw = 0; kw < g.kernel.w; ++kw) {
          const I xw = ow * g.stride.w - g.pad.w + kw;
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
template <typename I>
__device__ void windows_over(I p, I kernel, I stride, I pad, I out, I* first, I* last) {
  const I hi = p + pad;          // o * stride <= p + pad
  const I lo = hi - kernel + 1;  // o * stride >= p + pad - kernel + 1
  *first = lo <= 0 ? 0 : (lo + stride - 1) / stride;
  *last = min(hi / stride, out - 1);
}

template <typename E, typename Tap, typename I>
__global__ void max_pool_backward(const Stored<E>* diff_dst, const Tap* taps, Stored<E>* diff_src,
                                  Geometry<I> g, size_t count) {
  for (size_t i = first_index(); i < count; i += grid_stride()) {
    const Position<I> p = position_of(g, g.in, static_cast<I>(i));
    const I z = p.z, y = p.y, x = p.x;
    I d0, d1, h0, h1, w0, w1;
    windows_over(z, g.kernel.d, g.stride.d, g.pad.d, g.out.d, &d0, &d1);
    windows_over(y, g.kernel.h, g.stride.h, g.pad.h, g.out.h, &h0, &h1);
    windows_over(x, g.kernel.w, g.stride.w, g.pad.w, g.out.w, &w0, &w1);
    float sum = 0.f;
    for (I od = d0; od <= d1; ++od)
      for (I oh = h0; oh <= h1; ++oh)
        for (I ow = w0; ow <= w1; ++ow) {
          const I tap =
              ((z - (od * g.stride.d - g.pad.d)) * g.kernel.h + (y - (oh * g.stride.h - g.pad.h))) *
                  g.kernel.w +
              (x - (ow * g.stride.w - g.pad.w));
          const I o = offset_of(g, g.out, p.plane, od, oh, ow);
          if (static_cast<I>(taps[o]) == tap) sum += E::load(diff_dst[o]);
        }
    diff_src[i] = E::store(sum);
  }
}

// Windows that tile the input exactly (kernel = stride, no padding, extents multiples of the
// stride: CosmoFlow's pools): each input element lies in one window, so a thread per window
// writes the window's gradient (0 + dy at the maximum, as the reference adds it to zero, and 0
// elsewhere) with the divisions of one index instead of one per input element.
template <typename E, typename Tap, typename I>
__global__ void max_pool_backward_tiled(const Stored<E>* diff_dst, const Tap* taps,
                                        Stored<E>* diff_src, Geometry<I> g, size_t count) {
  for (size_t i = first_index(); i < count; i += grid_stride()) {
    const Position<I> o = position_of(g, g.out, static_cast<I>(i));
    const I od = o.z, oh = o.y, ow = o.x;
    const auto tap = static_cast<I>(taps[i]);
    const Stored<E> gradient = E::store(0.f + E::load(diff_dst[i])), zero = E::store(0.f);
    for (I kd = 0; kd < g.kernel.d; ++kd)
      for (I kh = 0; kh < g.kernel.h; ++kh)
        for (I kw = 0; kw < g.kernel.w; ++kw) {
          const I z = od * g.kernel.d + kd, y = oh * g.kernel.h + kh, x = ow * g.kernel.w + kw;
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

template <typename I>
Geometry<I> geometry_of(const PoolDesc& d, Layout layout) {
  const int r = d.spatial_rank;
  return {dims<I>(d.in_size, r, 1),       dims<I>(d.out_size, r, 1), dims<I>(d.kernel, r, 1),
          dims<I>(d.stride, r, 1),        dims<I>(d.pad_lo, r, 0),   static_cast<I>(d.channels),
          layout == Layout::channels_last};
}

size_t elements(const std::array<int64_t, 3>& size, const PoolDesc& d) {
  size_t count = static_cast<size_t>(d.n * d.channels);
  for (size_t a = 0; a < static_cast<size_t>(d.spatial_rank); ++a)
    count *= static_cast<size_t>(size[a]);
  return count;
}

// Index arithmetic in 32 bits where every index fits (a 64-bit division takes several times a
// 32-bit one's instructions, and a pooling does several per element).
bool fits_32_bits(const PoolDesc& d) {
  const auto most = static_cast<size_t>(INT32_MAX);
  return elements(d.in_size, d) <= most && elements(d.out_size, d) <= most;
}

}  // namespace

bool max_pool_taps_fit_a_byte(const PoolDesc& d) {
  int64_t taps = 1;
  for (int a = 0; a < d.spatial_rank; ++a) taps *= d.kernel[static_cast<size_t>(a)];
  return taps <= 255;
}

namespace {

// The launches for element type E, tap type Tap and index type I.
template <typename E, typename Tap, typename I>
void forward_with(const Geometry<I>& g, const void* src, void* dst, void* taps, size_t count,
                  cudaStream_t stream) {
  max_pool_forward<E, Tap, I><<<grid_for(count, kThreads), kThreads, 0, stream>>>(
      static_cast<const Stored<E>*>(src), static_cast<Stored<E>*>(dst), static_cast<Tap*>(taps), g,
      count);
}

template <typename E, typename Tap, typename I>
void backward_with(const Geometry<I>& g, bool tiled, const void* diff_dst, const void* taps,
                   void* diff_src, size_t count, cudaStream_t stream) {
  const auto* dy = static_cast<const Stored<E>*>(diff_dst);
  auto* dx = static_cast<Stored<E>*>(diff_src);
  const auto* t = static_cast<const Tap*>(taps);
  if (tiled)
    max_pool_backward_tiled<E, Tap, I>
        <<<grid_for(count, kThreads), kThreads, 0, stream>>>(dy, t, dx, g, count);
  else
    max_pool_backward<E, Tap, I>
        <<<grid_for(count, kThreads), kThreads, 0, stream>>>(dy, t, dx, g, count);
}

// The launch's element, tap and index types, for f(E{}, Tap{}, I{}).
template <typename F>
void with_types(const PoolDesc& d, F&& f) {
  for_element_type(d.dtype, "max pooling", [&](auto e) {
    const bool byte_taps = max_pool_taps_fit_a_byte(d);
    if (fits_32_bits(d)) {
      if (byte_taps) return f(e, uint8_t{}, int32_t{});
      return f(e, int32_t{}, int32_t{});
    }
    if (byte_taps) return f(e, uint8_t{}, int64_t{});
    return f(e, int32_t{}, int64_t{});
  });
}

}  // namespace

void max_pool_forward(const PoolDesc& d, Layout layout, const void* src, void* dst, void* taps,
                      cudaStream_t stream) {
  const size_t count = elements(d.out_size, d);
  if (count == 0) return;
  with_types(d, [&](auto e, auto tap, auto index) {
    using I = decltype(index);
    forward_with<decltype(e), decltype(tap), I>(geometry_of<I>(d, layout), src, dst, taps, count,
                                                stream);
  });
  CREST_CUDA_LAUNCHED();
}

// Where the windows tile the input, a thread per window (output); else a thread per input.
void max_pool_backward(const PoolDesc& d, Layout layout, const void* diff_dst, const void* taps,
                       void* diff_src, cudaStream_t stream) {
  const bool tiled = tiles_exactly(d);
  const size_t count = tiled ? elements(d.out_size, d) : elements(d.in_size, d);
  if (count == 0) return;
  with_types(d, [&](auto e, auto tap, auto index) {
    using I = decltype(index);
    backward_with<decltype(e), decltype(tap), I>(geometry_of<I>(d, layout), tiled, diff_dst, taps,
                                                 diff_src, count, stream);
  });
  CREST_CUDA_LAUNCHED();
}

}  // namespace crest::cuda
