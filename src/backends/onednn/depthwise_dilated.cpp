#include "onednn/depthwise_dilated.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "crest/core/bf16.hpp"
#include "crest/core/error.hpp"
#include "onednn/lane_addressing.hpp"
#include "onednn/lanes.hpp"
#include "widest_vectors.hpp"

namespace crest::onednn {

namespace {

// Channels are processed 16 at a time (lanes.hpp): one AVX-512 register of float32, and the
// block of oneDNN's nChw16c, so the loops read that layout (or channels-last) without a reorder.
using lanes::kLanes;
using lanes::Lanes;
using lanes::load;
using lanes::store;
// Kernel taps held per lane block (on the stack): up to 5x5.
constexpr int64_t kMaxTaps = 25;

struct Problem {
  int64_t samples = 0, blocks = 0;
  Addressing src, dst;
  int64_t kernel_h = 0, kernel_w = 0, stride_h = 0, stride_w = 0;
  int64_t dilation_h = 0, dilation_w = 0, pad_h = 0, pad_w = 0;  // dilation 1 = dense
  int64_t taps() const { return kernel_h * kernel_w; }
};

// Lane block b's weights, tap-major: taps[k][l] = weights[(16 b + l) * K + k] (crest's plain
// [C, 1, kh, kw]).
[[gnu::always_inline]] inline void gather_taps(const Problem& p, const float* weights, int64_t b,
                                               Lanes (&taps)[kMaxTaps]) {
  for (int64_t k = 0; k < p.taps(); ++k)
    for (int64_t l = 0; l < kLanes; ++l) taps[k][l] = weights[(b * kLanes + l) * p.taps() + k];
}

// The taps k in [lo, hi) of one axis with k * dilation in [low, high] (and k < kernel): computed
// once per pixel, so the tap loops carry no bounds checks.
struct TapRange {
  int64_t lo, hi;
};
inline TapRange taps_between(int64_t low, int64_t high, int64_t dilation, int64_t kernel) {
  const int64_t lo = low <= 0 ? 0 : (low + dilation - 1) / dilation;
  const int64_t hi = high < 0 ? 0 : std::min(kernel, high / dilation + 1);
  return {lo, hi};
}
// The taps of output coordinate o that read inside an input of `size`: o * stride - pad + k *
// dilation in [0, size).
inline TapRange taps_inside(int64_t o, int64_t stride, int64_t pad, int64_t dilation,
                            int64_t kernel, int64_t size) {
  const int64_t first = o * stride - pad;
  return taps_between(-first, size - 1 - first, dilation, kernel);
}

// dst(y, x) = bias + sum over taps of src(y * stride - pad + ky * dilation, ...) * w(ky, kx), for
// sample n's lane block b.
template <typename T>
[[gnu::always_inline]] inline void forward_block(const Problem& p, int64_t n, int64_t b,
                                                 const T* src, const float* weights,
                                                 const float* bias, T* dst) {
  Lanes taps[kMaxTaps];
  gather_taps(p, weights, b, taps);
  const Lanes initial = bias ? load(bias + b * kLanes) : Lanes{};
  const T* in = src + n * p.src.sample + b * p.src.block;
  T* out = dst + n * p.dst.sample + b * p.dst.block;
  for (int64_t oy = 0; oy < p.dst.height; ++oy) {
    const TapRange ys =
        taps_inside(oy, p.stride_h, p.pad_h, p.dilation_h, p.kernel_h, p.src.height);
    for (int64_t ox = 0; ox < p.dst.width; ++ox) {
      const TapRange xs =
          taps_inside(ox, p.stride_w, p.pad_w, p.dilation_w, p.kernel_w, p.src.width);
      Lanes acc = initial;
      for (int64_t ky = ys.lo; ky < ys.hi; ++ky) {
        const T* row =
            in + (oy * p.stride_h - p.pad_h + ky * p.dilation_h) * p.src.width * p.src.pixel;
        for (int64_t kx = xs.lo; kx < xs.hi; ++kx)
          acc += load(row + (ox * p.stride_w - p.pad_w + kx * p.dilation_w) * p.src.pixel) *
                 taps[ky * p.kernel_w + kx];
      }
      store(out + (oy * p.dst.width + ox) * p.dst.pixel, acc);
    }
  }
}

// diff_src(y, x) = sum over the taps that read (y, x) of diff_dst(output pixel) * w(tap):
// gathered per input pixel, so each is written once and no float32 accumulator is needed for
// 16-bit gradients. Tap k reads (y, x) from output row (y + pad - k * dilation) / stride where
// that divides.
template <typename T>
[[gnu::always_inline]] inline void backward_data_block(const Problem& p, int64_t n, int64_t b,
                                                       const T* diff_dst, const float* weights,
                                                       T* diff_src) {
  Lanes taps[kMaxTaps];
  gather_taps(p, weights, b, taps);
  const T* grad = diff_dst + n * p.dst.sample + b * p.dst.block;
  T* out = diff_src + n * p.src.sample + b * p.src.block;
  const int64_t reach_h = (p.dst.height - 1) * p.stride_h, reach_w = (p.dst.width - 1) * p.stride_w;
  for (int64_t iy = 0; iy < p.src.height; ++iy) {
    const int64_t my = iy + p.pad_h;
    const TapRange ys = taps_between(my - reach_h, my, p.dilation_h, p.kernel_h);
    for (int64_t ix = 0; ix < p.src.width; ++ix) {
      const int64_t mx = ix + p.pad_w;
      const TapRange xs = taps_between(mx - reach_w, mx, p.dilation_w, p.kernel_w);
      Lanes acc = {};
      for (int64_t ky = ys.lo; ky < ys.hi; ++ky) {
        const int64_t sy = my - ky * p.dilation_h;  // oy * stride
        if (p.stride_h > 1 && sy % p.stride_h != 0) continue;
        const int64_t oy = p.stride_h == 1 ? sy : sy / p.stride_h;
        for (int64_t kx = xs.lo; kx < xs.hi; ++kx) {
          const int64_t sx = mx - kx * p.dilation_w;
          if (p.stride_w > 1 && sx % p.stride_w != 0) continue;
          const int64_t ox = p.stride_w == 1 ? sx : sx / p.stride_w;
          acc += load(grad + (oy * p.dst.width + ox) * p.dst.pixel) * taps[ky * p.kernel_w + kx];
        }
      }
      store(out + (iy * p.src.width + ix) * p.src.pixel, acc);
    }
  }
}

// diff_w(tap) = sum over samples and output pixels of src(tap's input pixel) * diff_dst, in
// float32, for lane block b: each block's sums run in one fixed order whatever the thread count,
// so the result is deterministic.
template <typename T>
[[gnu::always_inline]] inline void backward_weights_block(const Problem& p, int64_t b, const T* src,
                                                          const T* diff_dst, float* diff_weights,
                                                          float* diff_bias) {
  Lanes acc[kMaxTaps] = {};
  Lanes bias_acc = {};
  for (int64_t n = 0; n < p.samples; ++n) {
    const T* in = src + n * p.src.sample + b * p.src.block;
    const T* grad = diff_dst + n * p.dst.sample + b * p.dst.block;
    for (int64_t oy = 0; oy < p.dst.height; ++oy)
      for (int64_t ox = 0; ox < p.dst.width; ++ox) {
        const Lanes g = load(grad + (oy * p.dst.width + ox) * p.dst.pixel);
        bias_acc += g;
        const TapRange ys =
            taps_inside(oy, p.stride_h, p.pad_h, p.dilation_h, p.kernel_h, p.src.height);
        const TapRange xs =
            taps_inside(ox, p.stride_w, p.pad_w, p.dilation_w, p.kernel_w, p.src.width);
        for (int64_t ky = ys.lo; ky < ys.hi; ++ky) {
          const T* row =
              in + (oy * p.stride_h - p.pad_h + ky * p.dilation_h) * p.src.width * p.src.pixel;
          for (int64_t kx = xs.lo; kx < xs.hi; ++kx)
            acc[ky * p.kernel_w + kx] +=
                load(row + (ox * p.stride_w - p.pad_w + kx * p.dilation_w) * p.src.pixel) * g;
        }
      }
  }
  for (int64_t l = 0; l < kLanes; ++l) {
    for (int64_t k = 0; k < p.taps(); ++k)
      diff_weights[(b * kLanes + l) * p.taps() + k] = acc[k][l];
    if (diff_bias) diff_bias[b * kLanes + l] = bias_acc[l];
  }
}

// The loops, one per activation type, compiled per instruction-set level (widest_vectors.hpp).
// The parallel loops sit in those functions themselves: OpenMP's outlined body inherits its
// function's target only there (a region inside the inlined template would be compiled once,
// for the baseline).
#define CREST_OVER_SAMPLE_BLOCKS(call)                                                        \
  _Pragma("omp parallel for collapse(2) schedule(static)") for (int64_t n = 0; n < p.samples; \
                                                                ++n) for (int64_t b = 0;      \
                                                                          b < p.blocks; ++b) call
#define CREST_OVER_BLOCKS(call) \
  _Pragma("omp parallel for schedule(static)") for (int64_t b = 0; b < p.blocks; ++b) call

#define CREST_WIDEST_VECTORS_LOOPS "onednn/depthwise_dilated.inc"
#include "widest_vectors_expand.hpp"

void forward_f32(const Problem& p, const float* s, const float* w, const float* bias, float* d) {
  CREST_WIDEST_VECTORS_CALL(forward_f32, p, s, w, bias, d);
}

void forward_bf16(const Problem& p, const uint16_t* s, const float* w, const float* bias,
                  uint16_t* d) {
  CREST_WIDEST_VECTORS_CALL(forward_bf16, p, s, w, bias, d);
}

void backward_data_f32(const Problem& p, const float* dd, const float* w, float* ds) {
  CREST_WIDEST_VECTORS_CALL(backward_data_f32, p, dd, w, ds);
}

void backward_data_bf16(const Problem& p, const uint16_t* dd, const float* w, uint16_t* ds) {
  CREST_WIDEST_VECTORS_CALL(backward_data_bf16, p, dd, w, ds);
}

void backward_weights_f32(const Problem& p, const float* s, const float* dd, float* dw, float* db) {
  CREST_WIDEST_VECTORS_CALL(backward_weights_f32, p, s, dd, dw, db);
}

void backward_weights_bf16(const Problem& p, const uint16_t* s, const uint16_t* dd, float* dw,
                           float* db) {
  CREST_WIDEST_VECTORS_CALL(backward_weights_bf16, p, s, dd, dw, db);
}

#undef CREST_OVER_SAMPLE_BLOCKS
#undef CREST_OVER_BLOCKS

class DilatedDepthwise final : public ConvKernel {
 public:
  explicit DilatedDepthwise(const ConvDesc& d) : bf16_(d.dtype == DType::bf16) {
    const Shape src_shape{d.n, d.in_channels, d.in_size[0], d.in_size[1]};
    const Shape dst_shape{d.n, d.out_channels, d.out_size[0], d.out_size[1]};
    const LaneLayout src = lane_layout(src_shape, d.dtype), dst = lane_layout(dst_shape, d.dtype);
    src_fmt_ = src.format;
    dst_fmt_ = dst.format;
    p_.samples = d.n;
    p_.blocks = d.in_channels / kLanes;
    p_.src = src.addressing;
    p_.dst = dst.addressing;
    p_.kernel_h = d.kernel[0];
    p_.kernel_w = d.kernel[1];
    p_.stride_h = d.stride[0];
    p_.stride_w = d.stride[1];
    p_.dilation_h = d.dilation[0];
    p_.dilation_w = d.dilation[1];
    p_.pad_h = d.pad_lo[0];
    p_.pad_w = d.pad_lo[1];
    bias_grad_ = d.bias && d.bias_grad;
  }

  MemFormat src_format() const override { return src_fmt_; }
  MemFormat dst_format() const override { return dst_fmt_; }
  size_t scratch_bytes() const override { return 0; }
  std::string implementation() const override {
    return "crest dilated depthwise loops (" + cpu_level_name(cpu_level()) + ")";
  }

  void forward(const void* src, const void* weights, const void* bias, void* dst,
               void* /*scratch*/) override {
    const auto* w = static_cast<const float*>(weights);
    const auto* b = static_cast<const float*>(bias);
    if (bf16_)
      forward_bf16(p_, static_cast<const uint16_t*>(src), w, b, static_cast<uint16_t*>(dst));
    else
      forward_f32(p_, static_cast<const float*>(src), w, b, static_cast<float*>(dst));
  }
  void backward_data(const void* diff_dst, const void* weights, void* diff_src,
                     void* /*scratch*/) override {
    const auto* w = static_cast<const float*>(weights);
    if (bf16_)
      backward_data_bf16(p_, static_cast<const uint16_t*>(diff_dst), w,
                         static_cast<uint16_t*>(diff_src));
    else
      backward_data_f32(p_, static_cast<const float*>(diff_dst), w, static_cast<float*>(diff_src));
  }
  void backward_weights(const void* src, const void* diff_dst, void* diff_weights, void* diff_bias,
                        void* /*scratch*/) override {
    auto* dw = static_cast<float*>(diff_weights);
    auto* db = bias_grad_ ? static_cast<float*>(diff_bias) : nullptr;
    if (bf16_)
      backward_weights_bf16(p_, static_cast<const uint16_t*>(src),
                            static_cast<const uint16_t*>(diff_dst), dw, db);
    else
      backward_weights_f32(p_, static_cast<const float*>(src), static_cast<const float*>(diff_dst),
                           dw, db);
  }

 private:
  bool bf16_;
  bool bias_grad_ = false;
  Problem p_;
  MemFormat src_fmt_, dst_fmt_;
};

}  // namespace

bool dilated_depthwise_applies(const ConvDesc& d) {
  const bool depthwise = d.groups == d.in_channels && d.out_channels == d.in_channels;
  const bool dilated = d.dilation[0] > 1 || d.dilation[1] > 1;
  return d.training && !d.transposed && d.spatial_rank == 2 && depthwise && dilated &&
         d.in_channels % kLanes == 0 && d.kernel[0] * d.kernel[1] <= kMaxTaps &&
         d.post_op.kind == EltwiseKind::none && (d.dtype == DType::f32 || d.dtype == DType::bf16);
}

std::unique_ptr<ConvKernel> make_dilated_depthwise(const ConvDesc& d) {
  if (!dilated_depthwise_applies(d))
    throw_usage("make_dilated_depthwise: the convolution is not a dilated depthwise one");
  return std::make_unique<DilatedDepthwise>(d);
}

}  // namespace crest::onednn
