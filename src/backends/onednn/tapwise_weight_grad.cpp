#include "onednn/tapwise_weight_grad.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "onednn/format.hpp"
#include "onednn/onednn_backend.hpp"

namespace crest::onednn {

using dnnl::memory;

bool TapwiseWeightGrad::applies(const ConvDesc& d, const memory::desc& src,
                                const memory::desc& dst) {
  if (d.spatial_rank != 2 || d.groups != 1 || d.transposed || !d.training) return false;
  if (d.stride[0] != 1 || d.stride[1] != 1) return false;
  if (d.bias && d.bias_grad) return false;  // the bias gradient stays with the primitive
  if (d.dtype != DType::f32 && d.dtype != DType::bf16) return false;
  // oneDNN 3.2 has no bf16 matmul below AVX-512 BF16 (AVX2): oneDNN's own primitive then, in the
  // emulation crest refuses for whole runs but a caller may still ask for one kernel.
  if (!dtype_support(d.dtype)) return false;
  return activations_channels_last(d, src, dst);
}

TapwiseWeightGrad::TapwiseWeightGrad(const ContextPtr& ctx, const ConvDesc& d)
    : d_(d), element_(dtype_size(d.dtype)) {
  const memory::data_type dt = to_dnnl(d.dtype);
  const int64_t in_c = d.in_channels, out_c = d.out_channels;
  for (int64_t kh = 0; kh < d.kernel[0]; ++kh)
    for (int64_t kw = 0; kw < d.kernel[1]; ++kw) {
      Tap t;
      t.dh = kh * d.dilation[0] - d.pad_lo[0];
      t.dw = kw * d.dilation[1] - d.pad_lo[1];
      // Output o reads input o + offset: inside for o in [-offset, in - offset).
      t.oh0 = std::clamp<int64_t>(-t.dh, 0, d.out_size[0]);
      t.oh1 = std::clamp<int64_t>(d.in_size[0] - t.dh, t.oh0, d.out_size[0]);
      t.ow0 = std::clamp<int64_t>(-t.dw, 0, d.out_size[1]);
      t.ow1 = std::clamp<int64_t>(d.in_size[1] - t.dw, t.ow0, d.out_size[1]);
      t.rows = d.n * (t.oh1 - t.oh0) * (t.ow1 - t.ow0);
      if (t.rows > 0) {
        // dY^T (gathered rows of dY read transposed) times X: [out_c, rows] x [rows, in_c].
        const memory::desc a({out_c, t.rows}, dt, memory::dims{1, out_c});
        const memory::desc b({t.rows, in_c}, dt, memory::format_tag::ab);
        const memory::desc c({out_c, in_c}, memory::data_type::f32, memory::format_tag::ab);
        const std::string what = "tap-wise weight gradient matmul " + std::to_string(out_c) + "x" +
                                 std::to_string(t.rows) + "x" + std::to_string(in_c);
        t.matmul = bound_matmul(ctx, a, b, c, false, what);
        matmul_scratch_ = std::max(matmul_scratch_, t.matmul.scratchpad_bytes());
      }
      max_rows_ = std::max(max_rows_, t.rows);
      taps_.push_back(std::move(t));
    }
  ScratchCarver c;
  c.take(static_cast<size_t>(max_rows_ * in_c) * element_);
  c.take(static_cast<size_t>(max_rows_ * out_c) * element_);
  c.take(taps_.size() * static_cast<size_t>(out_c * in_c) * sizeof(float));
  c.take(matmul_scratch_);
  scratch_ = c.used();
}

// The tap's rows, pixel by pixel in (n, oh, ow) order: X from the input at the tap's offset, dY
// at the output pixel. Within an output row the pixels are consecutive on both sides.
void TapwiseWeightGrad::gather(const Tap& t, const char* src, const char* diff_dst, char* x,
                               char* y) const {
  const int64_t in_h = d_.in_size[0], in_w = d_.in_size[1];
  const int64_t out_h = d_.out_size[0], out_w = d_.out_size[1];
  const int64_t height = t.oh1 - t.oh0, width = t.ow1 - t.ow0;
  const size_t x_pixel = static_cast<size_t>(d_.in_channels) * element_;
  const size_t y_pixel = static_cast<size_t>(d_.out_channels) * element_;
#pragma omp parallel for collapse(2) schedule(static) if (t.rows * d_.in_channels >= (1 << 16))
  for (int64_t n = 0; n < d_.n; ++n)
    for (int64_t r = 0; r < height; ++r) {
      const int64_t oh = t.oh0 + r, row = n * height + r;
      const int64_t in_pixel = (n * in_h + oh + t.dh) * in_w + t.ow0 + t.dw;
      const int64_t out_pixel = (n * out_h + oh) * out_w + t.ow0;
      std::memcpy(x + static_cast<size_t>(row * width) * x_pixel,
                  src + static_cast<size_t>(in_pixel) * x_pixel,
                  static_cast<size_t>(width) * x_pixel);
      std::memcpy(y + static_cast<size_t>(row * width) * y_pixel,
                  diff_dst + static_cast<size_t>(out_pixel) * y_pixel,
                  static_cast<size_t>(width) * y_pixel);
    }
}

void TapwiseWeightGrad::run(const void* src, const void* diff_dst, float* diff_weights,
                            void* scratch) {
  const int64_t in_c = d_.in_channels, out_c = d_.out_channels;
  const auto slice = static_cast<size_t>(out_c * in_c);
  ScratchCarver c(scratch);
  auto* x = static_cast<char*>(c.take(static_cast<size_t>(max_rows_ * in_c) * element_));
  auto* y = static_cast<char*>(c.take(static_cast<size_t>(max_rows_ * out_c) * element_));
  auto* per_tap = static_cast<float*>(c.take(taps_.size() * slice * sizeof(float)));
  void* matmul_scratch = c.take(matmul_scratch_);
  for (size_t k = 0; k < taps_.size(); ++k) {
    Tap& t = taps_[k];
    float* out = per_tap + k * slice;
    if (t.rows == 0) {  // a tap that reads only padding
      std::fill(out, out + slice, 0.f);
      continue;
    }
    gather(t, static_cast<const char*>(src), static_cast<const char*>(diff_dst), x, y);
    t.matmul.set(DNNL_ARG_SRC, y);
    t.matmul.set(DNNL_ARG_WEIGHTS, x);
    t.matmul.set(DNNL_ARG_DST, out);
    t.matmul.run(matmul_scratch);
  }
  interleave_taps(per_tap, static_cast<int64_t>(taps_.size()), out_c, in_c, diff_weights);
}

}  // namespace crest::onednn
