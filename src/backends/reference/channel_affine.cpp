// Reference per-channel affine map: plain loops over [n, channels, spatial], float and double.
#include "crest/backends/channel_affine_kernel.hpp"
#include "reference/reference_kernels.hpp"

namespace crest::reference {
namespace {

template <typename T>
class ChannelAffine final : public ChannelAffineKernel {
 public:
  explicit ChannelAffine(const ChannelAffineDesc& d) : d_(d) {}

  void forward(const void* src_v, const void* scale_v, const void* shift_v, void* dst_v) override {
    const T* x = static_cast<const T*>(src_v);
    const T* scale = static_cast<const T*>(scale_v);
    const T* shift = d_.shift ? static_cast<const T*>(shift_v) : nullptr;
    T* y = static_cast<T*>(dst_v);
    each([&](int64_t c, int64_t i) { y[i] = scale[c] * x[i] + (shift ? shift[c] : T(0)); });
  }

  void backward_data(const void* diff_dst_v, const void* scale_v, void* diff_src_v) override {
    const T* dy = static_cast<const T*>(diff_dst_v);
    const T* scale = static_cast<const T*>(scale_v);
    T* dx = static_cast<T*>(diff_src_v);
    each([&](int64_t c, int64_t i) { dx[i] = scale[c] * dy[i]; });
  }

  void backward_weights(const void* src_v, const void* diff_dst_v, void* diff_scale_v,
                        void* diff_shift_v) override {
    const T* x = static_cast<const T*>(src_v);
    const T* dy = static_cast<const T*>(diff_dst_v);
    T* dscale = static_cast<T*>(diff_scale_v);
    T* dshift = d_.shift ? static_cast<T*>(diff_shift_v) : nullptr;
    for (int64_t c = 0; c < d_.channels; ++c) {
      dscale[c] = T(0);
      if (dshift) dshift[c] = T(0);
    }
    each([&](int64_t c, int64_t i) {
      dscale[c] += dy[i] * x[i];
      if (dshift) dshift[c] += dy[i];
    });
  }

 private:
  // f(channel, flat index) over every element, in memory order.
  template <typename F>
  void each(F f) const {
    for (int64_t n = 0; n < d_.n; ++n)
      for (int64_t c = 0; c < d_.channels; ++c)
        for (int64_t s = 0, i = (n * d_.channels + c) * d_.spatial; s < d_.spatial; ++s, ++i)
          f(c, i);
  }

  ChannelAffineDesc d_;
};

// The float32 and float64 kernels; make_channel_affine wraps them for bf16 and fp16.
std::unique_ptr<ChannelAffineKernel> float_channel_affine(const ChannelAffineDesc& d) {
  require_float_dtype(d.dtype, "channel_affine");
  if (d.dtype == DType::f64) return std::make_unique<ChannelAffine<double>>(d);
  return std::make_unique<ChannelAffine<float>>(d);
}

std::unique_ptr<ChannelAffineKernel> make_channel_affine(Backend& /*backend*/,
                                                         const ChannelAffineDesc& d) {
  if (!is_half(d.dtype)) return float_channel_affine(d);
  ChannelAffineDesc f = d;
  f.dtype = DType::f32;
  return make_half_channel_affine(d, float_channel_affine(f));
}

}  // namespace

CREST_REGISTER_KERNEL(reference_channel_affine, "reference", ChannelAffineKernel,
                      make_channel_affine);

}  // namespace crest::reference
