// Reference convolution and transposed convolution (1-D, 2-D, 3-D; groups, stride, dilation,
// asymmetric padding, bias, fused activation).
//
// Both directions are one relation between an "image" tensor and a "grid" tensor:
//   grid[n, gc, o] <-> image[n, g * image_per_group + ic, o * stride - pad_lo + k * dilation]
// weighted by w[gc, ic, k]. A convolution gathers image -> grid (src is the image); a transposed
// convolution is its adjoint and scatters grid -> image (src is the grid). Writing the index
// relation once and using it for all six passes keeps forward and backward exact adjoints.
#include <string>

#include "reference/eltwise_math.hpp"
#include "reference/reference_kernels.hpp"

namespace crest::reference {
namespace {

struct Correlation {
  int64_t n = 1, image_channels = 1, grid_channels = 1, groups = 1;
  Dims3 image{1, 1, 1}, grid{1, 1, 1}, kernel{1, 1, 1}, stride{1, 1, 1}, dilation{1, 1, 1},
      pad_lo{0, 0, 0};
};

// Calls fn(grid_offset, image_offset, weight_offset) for every (output position, kernel tap)
// pair that lands inside the image; taps that land in the padding contribute nothing.
template <typename Fn>
void for_each_tap(const Correlation& c, Fn&& fn) {
  const int64_t grid_per_group = c.grid_channels / c.groups;
  const int64_t image_per_group = c.image_channels / c.groups;
  const int64_t image_volume = volume(c.image);
  const int64_t grid_volume = volume(c.grid);
  const int64_t kernel_volume = volume(c.kernel);
  for (int64_t n = 0; n < c.n; ++n) {
    for (int64_t gc = 0; gc < c.grid_channels; ++gc) {
      const int64_t group = gc / grid_per_group;
      for (int64_t icg = 0; icg < image_per_group; ++icg) {
        const int64_t ic = group * image_per_group + icg;
        const int64_t image_base = (n * c.image_channels + ic) * image_volume;
        const int64_t grid_base = (n * c.grid_channels + gc) * grid_volume;
        const int64_t weight_base = (gc * image_per_group + icg) * kernel_volume;
        for (int64_t od = 0; od < c.grid[0]; ++od)
          for (int64_t oh = 0; oh < c.grid[1]; ++oh)
            for (int64_t ow = 0; ow < c.grid[2]; ++ow) {
              const int64_t grid_offset = grid_base + (od * c.grid[1] + oh) * c.grid[2] + ow;
              for (int64_t kd = 0; kd < c.kernel[0]; ++kd) {
                const int64_t id = od * c.stride[0] - c.pad_lo[0] + kd * c.dilation[0];
                if (id < 0 || id >= c.image[0]) continue;
                for (int64_t kh = 0; kh < c.kernel[1]; ++kh) {
                  const int64_t ih = oh * c.stride[1] - c.pad_lo[1] + kh * c.dilation[1];
                  if (ih < 0 || ih >= c.image[1]) continue;
                  for (int64_t kw = 0; kw < c.kernel[2]; ++kw) {
                    const int64_t iw = ow * c.stride[2] - c.pad_lo[2] + kw * c.dilation[2];
                    if (iw < 0 || iw >= c.image[2]) continue;
                    fn(grid_offset, image_base + (id * c.image[1] + ih) * c.image[2] + iw,
                       weight_base + (kd * c.kernel[1] + kh) * c.kernel[2] + kw);
                  }
                }
              }
            }
      }
    }
  }
}

// Output size of a (non-transposed) convolution along one axis, or <= 0 if the padded input is
// shorter than the dilated kernel.
int64_t conv_out_size(int64_t in, int64_t k, int64_t stride, int64_t dilation, int64_t lo,
                      int64_t hi) {
  const int64_t span = in + lo + hi - dilation * (k - 1) - 1;
  return span < 0 ? 0 : span / stride + 1;
}

void validate_conv(const ConvDesc& d) {
  const std::string what = d.transposed ? "transposed conv" : "conv";
  require_float_dtype(d.dtype, what);
  if (d.spatial_rank < 1 || d.spatial_rank > 3)
    throw_input(what + ": spatial_rank must be 1, 2 or 3, got " + std::to_string(d.spatial_rank));
  if (d.n <= 0 || d.in_channels <= 0 || d.out_channels <= 0 || d.groups <= 0)
    throw_input(what + ": batch (" + std::to_string(d.n) + "), in_channels (" +
                std::to_string(d.in_channels) + "), out_channels (" +
                std::to_string(d.out_channels) + ") and groups (" + std::to_string(d.groups) +
                ") must all be positive");
  if (d.in_channels % d.groups != 0 || d.out_channels % d.groups != 0)
    throw_input(what + ": in_channels " + std::to_string(d.in_channels) + " and out_channels " +
                std::to_string(d.out_channels) + " must both be divisible by groups " +
                std::to_string(d.groups));
  const int r = d.spatial_rank;
  for (int i = 0; i < r; ++i) {
    const auto a = static_cast<size_t>(i);
    const std::string axis = axis_label(i);
    if (d.in_size[a] <= 0 || d.out_size[a] <= 0)
      throw_input(what + ": spatial sizes must be positive, got in_size " + dims_str(d.in_size, r) +
                  ", out_size " + dims_str(d.out_size, r));
    if (d.kernel[a] <= 0 || d.stride[a] <= 0 || d.dilation[a] <= 0)
      throw_input(what + ": kernel " + dims_str(d.kernel, r) + ", stride " + dims_str(d.stride, r) +
                  " and dilation " + dims_str(d.dilation, r) +
                  " must be positive (dilation 1 is a dense kernel)");
    if (d.pad_lo[a] < 0 || d.pad_hi[a] < 0)
      throw_input(what + ": padding must be >= 0, got pad_lo " + dims_str(d.pad_lo, r) +
                  ", pad_hi " + dims_str(d.pad_hi, r));
    const std::string geometry =
        "kernel " + std::to_string(d.kernel[a]) + ", stride " + std::to_string(d.stride[a]) +
        ", dilation " + std::to_string(d.dilation[a]) + ", pad_lo " + std::to_string(d.pad_lo[a]) +
        ", pad_hi " + std::to_string(d.pad_hi[a]);
    if (!d.transposed) {
      const int64_t expect = conv_out_size(d.in_size[a], d.kernel[a], d.stride[a], d.dilation[a],
                                           d.pad_lo[a], d.pad_hi[a]);
      if (expect <= 0)
        throw_input(what + ": along axis " + axis + " the padded input " +
                    std::to_string(d.in_size[a]) + " is smaller than the dilated kernel (" +
                    geometry + ")");
      if (d.out_size[a] != expect)
        throw_input(what + ": out_size" + axis + " is " + std::to_string(d.out_size[a]) +
                    " but input " + std::to_string(d.in_size[a]) + " with " + geometry + " gives " +
                    std::to_string(expect));
    } else {
      // The transposed conv is the adjoint of the conv from out_size to in_size, so that conv
      // must map out_size back to in_size. Sizes up to stride - 1 above the minimum (PyTorch's
      // output_padding) satisfy this too; their extra positions receive only the bias.
      const int64_t minimum = (d.in_size[a] - 1) * d.stride[a] - d.pad_lo[a] - d.pad_hi[a] +
                              d.dilation[a] * (d.kernel[a] - 1) + 1;
      const int64_t back = conv_out_size(d.out_size[a], d.kernel[a], d.stride[a], d.dilation[a],
                                         d.pad_lo[a], d.pad_hi[a]);
      if (back != d.in_size[a])
        throw_input(what + ": out_size" + axis + " is " + std::to_string(d.out_size[a]) +
                    " but input " + std::to_string(d.in_size[a]) + " with " + geometry +
                    " needs (in - 1) * stride - pad_lo - pad_hi + dilation * (kernel - 1) + 1 = " +
                    std::to_string(minimum) + " (plus at most stride - 1 output padding)");
    }
  }
  validate_eltwise(d.post_op, what.c_str());
}

template <typename T>
class Conv final : public ConvKernel {
 public:
  explicit Conv(const ConvDesc& d) : desc_(d) {
    const int r = d.spatial_rank;
    // The image side is the conv's src, or the transposed conv's dst.
    rel_.n = d.n;
    rel_.groups = d.groups;
    rel_.image_channels = d.transposed ? d.out_channels : d.in_channels;
    rel_.grid_channels = d.transposed ? d.in_channels : d.out_channels;
    rel_.image = widen(d.transposed ? d.out_size : d.in_size, r, 1);
    rel_.grid = widen(d.transposed ? d.in_size : d.out_size, r, 1);
    rel_.kernel = widen(d.kernel, r, 1);
    rel_.stride = widen(d.stride, r, 1);
    rel_.dilation = widen(d.dilation, r, 1);
    rel_.pad_lo = widen(d.pad_lo, r, 0);
    src_count_ = d.n * d.in_channels * volume(widen(d.in_size, r, 1));
    dst_count_ = d.n * d.out_channels * volume(widen(d.out_size, r, 1));
    weight_count_ = rel_.grid_channels * (rel_.image_channels / d.groups) * volume(rel_.kernel);
    dst_spatial_ = volume(widen(d.out_size, r, 1));
  }

  MemFormat src_format() const override {
    return plain_format(
        activation_shape(desc_.n, desc_.in_channels, desc_.in_size, desc_.spatial_rank),
        desc_.dtype);
  }
  MemFormat dst_format() const override {
    return plain_format(
        activation_shape(desc_.n, desc_.out_channels, desc_.out_size, desc_.spatial_rank),
        desc_.dtype);
  }
  size_t scratch_bytes() const override { return 0; }

  void forward(const void* src_v, const void* weights_v, const void* bias_v, void* dst_v,
               void* /*scratch*/) override {
    const T* src = static_cast<const T*>(src_v);
    const T* w = static_cast<const T*>(weights_v);
    T* dst = static_cast<T*>(dst_v);
    fill_zero(dst, dst_count_);
    if (!desc_.transposed)
      for_each_tap(rel_, [&](int64_t g, int64_t i, int64_t k) { dst[g] += w[k] * src[i]; });
    else
      for_each_tap(rel_, [&](int64_t g, int64_t i, int64_t k) { dst[i] += w[k] * src[g]; });
    // Bias, then the activation: the fused post-op sees exactly what a separate layer would.
    CREST_CHECK(!desc_.bias || bias_v, "conv with bias called without a bias pointer");
    const T* bias = desc_.bias ? static_cast<const T*>(bias_v) : nullptr;
    for (int64_t n = 0; n < desc_.n; ++n)
      for (int64_t c = 0; c < desc_.out_channels; ++c) {
        T* plane = dst + (n * desc_.out_channels + c) * dst_spatial_;
        for (int64_t s = 0; s < dst_spatial_; ++s) {
          const T pre = bias ? plane[s] + bias[c] : plane[s];
          plane[s] = eltwise_forward(desc_.post_op, pre);
        }
      }
  }

  // diff_dst is the gradient wrt the pre-activation output: the caller has already applied the
  // post-op's backward.
  void backward_data(const void* diff_dst_v, const void* weights_v, void* diff_src_v,
                     void* /*scratch*/) override {
    const T* diff_dst = static_cast<const T*>(diff_dst_v);
    const T* w = static_cast<const T*>(weights_v);
    T* diff_src = static_cast<T*>(diff_src_v);
    fill_zero(diff_src, src_count_);
    if (!desc_.transposed)
      for_each_tap(rel_,
                   [&](int64_t g, int64_t i, int64_t k) { diff_src[i] += w[k] * diff_dst[g]; });
    else
      for_each_tap(rel_,
                   [&](int64_t g, int64_t i, int64_t k) { diff_src[g] += w[k] * diff_dst[i]; });
  }

  void backward_weights(const void* src_v, const void* diff_dst_v, void* diff_weights_v,
                        void* diff_bias_v, void* /*scratch*/) override {
    const T* src = static_cast<const T*>(src_v);
    const T* diff_dst = static_cast<const T*>(diff_dst_v);
    T* dw = static_cast<T*>(diff_weights_v);
    fill_zero(dw, weight_count_);
    if (!desc_.transposed)
      for_each_tap(rel_, [&](int64_t g, int64_t i, int64_t k) { dw[k] += diff_dst[g] * src[i]; });
    else
      for_each_tap(rel_, [&](int64_t g, int64_t i, int64_t k) { dw[k] += src[g] * diff_dst[i]; });
    if (desc_.bias && diff_bias_v) {
      T* db = static_cast<T*>(diff_bias_v);
      fill_zero(db, desc_.out_channels);
      for (int64_t n = 0; n < desc_.n; ++n)
        for (int64_t c = 0; c < desc_.out_channels; ++c) {
          const T* plane = diff_dst + (n * desc_.out_channels + c) * dst_spatial_;
          for (int64_t s = 0; s < dst_spatial_; ++s) db[c] += plane[s];
        }
    }
  }

 private:
  static void fill_zero(T* p, int64_t count) {
    for (int64_t i = 0; i < count; ++i) p[i] = T(0);
  }

  ConvDesc desc_;
  Correlation rel_;
  int64_t src_count_ = 0, dst_count_ = 0, weight_count_ = 0, dst_spatial_ = 0;
};

}  // namespace

std::unique_ptr<ConvKernel> make_conv(const ConvDesc& d) {
  validate_conv(d);
  if (d.dtype == DType::f64) return std::make_unique<Conv<double>>(d);
  return std::make_unique<Conv<float>>(d);
}

}  // namespace crest::reference
