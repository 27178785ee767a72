// Reference pooling: max (with argmax workspace), average including or excluding padding.
#include <string>
#include <vector>

#include "reference/reference_kernels.hpp"

namespace crest::reference {
namespace {

void validate_pool(const PoolDesc& d) {
  const std::string what = "pool";
  require_float_dtype(d.dtype, what);
  if (d.spatial_rank < 1 || d.spatial_rank > 3)
    throw_input(what + ": spatial_rank must be 1, 2 or 3, got " + std::to_string(d.spatial_rank));
  if (d.n <= 0 || d.channels <= 0)
    throw_input(what + ": batch (" + std::to_string(d.n) + ") and channels (" +
                std::to_string(d.channels) + ") must be positive");
  const int r = d.spatial_rank;
  for (int i = 0; i < r; ++i) {
    const auto a = static_cast<size_t>(i);
    const std::string axis = axis_label(i);
    if (d.in_size[a] <= 0 || d.out_size[a] <= 0)
      throw_input(what + ": spatial sizes must be positive, got in_size " + dims_str(d.in_size, r) +
                  ", out_size " + dims_str(d.out_size, r));
    if (d.kernel[a] <= 0 || d.stride[a] <= 0)
      throw_input(what + ": kernel " + dims_str(d.kernel, r) + " and stride " +
                  dims_str(d.stride, r) + " must be positive");
    // Padding smaller than the kernel guarantees every window holds at least one real element,
    // so a max always exists and the exclude-pad divisor is never zero.
    if (d.pad_lo[a] < 0 || d.pad_hi[a] < 0 || d.pad_lo[a] >= d.kernel[a] ||
        d.pad_hi[a] >= d.kernel[a])
      throw_input(what + ": padding must be >= 0 and smaller than the kernel " +
                  dims_str(d.kernel, r) + ", got pad_lo " + dims_str(d.pad_lo, r) + ", pad_hi " +
                  dims_str(d.pad_hi, r));
    const int64_t span = d.in_size[a] + d.pad_lo[a] + d.pad_hi[a] - d.kernel[a];
    if (span < 0)
      throw_input(what + ": along axis " + axis + " the padded input " +
                  std::to_string(d.in_size[a]) + " is smaller than the kernel " +
                  std::to_string(d.kernel[a]));
    const int64_t expect = span / d.stride[a] + 1;
    if (d.out_size[a] != expect)
      throw_input(what + ": out_size" + axis + " is " + std::to_string(d.out_size[a]) +
                  " but input " + std::to_string(d.in_size[a]) + " with kernel " +
                  std::to_string(d.kernel[a]) + ", stride " + std::to_string(d.stride[a]) +
                  ", pad_lo " + std::to_string(d.pad_lo[a]) + ", pad_hi " +
                  std::to_string(d.pad_hi[a]) + " gives " + std::to_string(expect));
  }
}

template <typename T>
class Pool final : public PoolKernel {
 public:
  explicit Pool(const PoolDesc& d) : desc_(d) {
    const int r = d.spatial_rank;
    in_ = widen(d.in_size, r, 1);
    out_ = widen(d.out_size, r, 1);
    kernel_ = widen(d.kernel, r, 1);
    stride_ = widen(d.stride, r, 1);
    pad_lo_ = widen(d.pad_lo, r, 0);
    planes_ = d.n * d.channels;
    taps_.resize(static_cast<size_t>(volume(kernel_)));  // sized once: execution never allocates
  }

  MemFormat src_format() const override {
    return plain_format(
        activation_shape(desc_.n, desc_.channels, desc_.in_size, desc_.spatial_rank), desc_.dtype);
  }
  MemFormat dst_format() const override {
    return plain_format(
        activation_shape(desc_.n, desc_.channels, desc_.out_size, desc_.spatial_rank), desc_.dtype);
  }
  // Max pooling keeps, per output element, the flat src index (int64) of its argmax.
  size_t workspace_bytes() const override {
    return desc_.kind == PoolKind::max
               ? static_cast<size_t>(planes_ * volume(out_)) * sizeof(int64_t)
               : 0;
  }
  size_t scratch_bytes() const override { return 0; }

  void forward(const void* src_v, void* dst_v, void* workspace, void* /*scratch*/) override {
    const T* src = static_cast<const T*>(src_v);
    T* dst = static_cast<T*>(dst_v);
    int64_t* argmax = static_cast<int64_t*>(workspace);
    const int64_t kernel_volume = volume(kernel_);
    for_each_window([&](int64_t out_index, const int64_t* taps, int64_t count) {
      if (desc_.kind == PoolKind::max) {
        // Strictly greater: ties keep the first maximum in row-major window order.
        int64_t best = taps[0];
        for (int64_t t = 1; t < count; ++t)
          if (src[taps[t]] > src[best]) best = taps[t];
        dst[out_index] = src[best];
        if (argmax) argmax[out_index] = best;
      } else {
        T sum = T(0);
        for (int64_t t = 0; t < count; ++t) sum += src[taps[t]];
        const int64_t divisor = desc_.kind == PoolKind::avg_include_pad ? kernel_volume : count;
        dst[out_index] = sum / static_cast<T>(divisor);
      }
    });
  }

  void backward(const void* diff_dst_v, const void* workspace, void* diff_src_v,
                void* /*scratch*/) override {
    const T* diff_dst = static_cast<const T*>(diff_dst_v);
    T* diff_src = static_cast<T*>(diff_src_v);
    const int64_t src_count = planes_ * volume(in_);
    for (int64_t i = 0; i < src_count; ++i) diff_src[i] = T(0);
    const int64_t out_count = planes_ * volume(out_);
    if (desc_.kind == PoolKind::max) {
      const int64_t* argmax = static_cast<const int64_t*>(workspace);
      CREST_CHECK(argmax != nullptr, "max pool backward needs the forward workspace");
      for (int64_t o = 0; o < out_count; ++o) diff_src[argmax[o]] += diff_dst[o];
      return;
    }
    const int64_t kernel_volume = volume(kernel_);
    for_each_window([&](int64_t out_index, const int64_t* taps, int64_t count) {
      const int64_t divisor = desc_.kind == PoolKind::avg_include_pad ? kernel_volume : count;
      const T share = diff_dst[out_index] / static_cast<T>(divisor);
      for (int64_t t = 0; t < count; ++t) diff_src[taps[t]] += share;
    });
  }

 private:
  // Calls fn(out_index, taps, count) per output element with the flat src indices of the
  // window positions that fall inside the input (padding positions are never listed).
  template <typename Fn>
  void for_each_window(Fn&& fn) {
    std::vector<int64_t>& taps = taps_;
    const int64_t in_volume = volume(in_);
    int64_t out_index = 0;
    for (int64_t p = 0; p < planes_; ++p)
      for (int64_t od = 0; od < out_[0]; ++od)
        for (int64_t oh = 0; oh < out_[1]; ++oh)
          for (int64_t ow = 0; ow < out_[2]; ++ow, ++out_index) {
            int64_t count = 0;
            for (int64_t kd = 0; kd < kernel_[0]; ++kd) {
              const int64_t id = od * stride_[0] - pad_lo_[0] + kd;
              if (id < 0 || id >= in_[0]) continue;
              for (int64_t kh = 0; kh < kernel_[1]; ++kh) {
                const int64_t ih = oh * stride_[1] - pad_lo_[1] + kh;
                if (ih < 0 || ih >= in_[1]) continue;
                for (int64_t kw = 0; kw < kernel_[2]; ++kw) {
                  const int64_t iw = ow * stride_[2] - pad_lo_[2] + kw;
                  if (iw < 0 || iw >= in_[2]) continue;
                  taps[static_cast<size_t>(count++)] =
                      p * in_volume + (id * in_[1] + ih) * in_[2] + iw;
                }
              }
            }
            fn(out_index, taps.data(), count);
          }
  }

  PoolDesc desc_;
  Dims3 in_{}, out_{}, kernel_{}, stride_{}, pad_lo_{};
  int64_t planes_ = 0;
  std::vector<int64_t> taps_;
};

}  // namespace

std::unique_ptr<PoolKernel> make_pool(const PoolDesc& d) {
  validate_pool(d);
  if (d.dtype == DType::f64) return std::make_unique<Pool<double>>(d);
  return std::make_unique<Pool<float>>(d);
}

}  // namespace crest::reference
