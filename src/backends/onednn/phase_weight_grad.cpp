#include "onednn/phase_weight_grad.hpp"

#include <algorithm>
#include <cstring>

#include "onednn/format.hpp"
#include "onednn/onednn_backend.hpp"

namespace crest::onednn {

using dnnl::memory;

namespace {

int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

PhaseWeightGrad::Axis axis(const ConvDesc& d, size_t i) {
  PhaseWeightGrad::Axis a;
  a.in = d.in_size[i];
  a.out = d.out_size[i];
  a.stride = d.stride[i];
  int64_t most_negative = 0, most_positive = 0;
  for (int64_t k = 0; k < d.kernel[i]; ++k) {
    const int64_t t = k * d.dilation[i] - d.pad_lo[i];  // output s*i + t
    const int64_t q = floor_div(t, a.stride);
    a.phase.push_back(t - q * a.stride);
    a.shift.push_back(q);
    most_negative = std::min(most_negative, q);
    most_positive = std::max(most_positive, q);
  }
  a.lo = -most_negative;
  a.grid = a.in + a.lo + most_positive;
  return a;
}

}  // namespace

bool PhaseWeightGrad::applies(const ConvDesc& d, const memory::desc& src, const memory::desc& dst) {
  if (d.spatial_rank != 2 || d.groups != 1 || !d.transposed || !d.training) return false;
  if (d.stride[0] == 1 && d.stride[1] == 1) return false;  // not strided: oneDNN's kernels do well
  if (d.bias && d.bias_grad) return false;  // the bias gradient stays with the primitive
  if (d.dtype != DType::f32 && d.dtype != DType::bf16) return false;
  // oneDNN 3.2 has no bf16 matmul below AVX-512 BF16 (AVX2): oneDNN's own primitive then, in the
  // emulation crest refuses for whole runs but a caller may still ask for one kernel.
  if (!dtype_support(d.dtype)) return false;
  if (std::min(d.in_channels, d.out_channels) < kPhaseWeightGradMinChannels) return false;
  return activations_channels_last(d, src, dst);
}

PhaseWeightGrad::PhaseWeightGrad(const ContextPtr& ctx, const ConvDesc& d)
    : d_(d), h_(axis(d, 0)), w_(axis(d, 1)), element_(dtype_size(d.dtype)) {
  grid_pixels_ = h_.grid * w_.grid;
  tail_pixels_ = (*std::max_element(h_.shift.begin(), h_.shift.end()) + h_.lo) * w_.grid +
                 *std::max_element(w_.shift.begin(), w_.shift.end()) + w_.lo;
  const memory::data_type dt = to_dnnl(d.dtype);
  const int64_t in_c = d.in_channels, out_c = d.out_channels;
  // X^T (the input grid read transposed) times the phase grid at the tap's offset:
  // [in_c, pixels] x [pixels, out_c].
  const memory::desc a({in_c, grid_pixels_}, dt, memory::dims{1, in_c});
  const memory::desc b({grid_pixels_, out_c}, dt, memory::format_tag::ab);
  const memory::desc c({in_c, out_c}, memory::data_type::f32, memory::format_tag::ab);
  const std::string what = "phase-wise weight gradient matmul " + std::to_string(in_c) + "x" +
                           std::to_string(grid_pixels_) + "x" + std::to_string(out_c);
  first_ = bound_matmul(ctx, a, b, c, false, what);
  if (d.n > 1) accumulate_ = bound_matmul(ctx, a, b, c, true, what + " (accumulating)");
  const size_t matmul_scratch = std::max(first_.scratchpad_bytes(), accumulate_.scratchpad_bytes());
  ScratchCarver carve;
  carve.take(static_cast<size_t>(grid_pixels_ * in_c) * element_);
  carve.take(static_cast<size_t>((grid_pixels_ + tail_pixels_) * out_c) * element_);
  carve.take(static_cast<size_t>(d.kernel[0] * d.kernel[1] * in_c * out_c) * sizeof(float));
  carve.take(matmul_scratch);
  scratch_ = carve.used();
}

// Sample n's input in the grid's rows and columns from the top left; zero after them.
void PhaseWeightGrad::fill_input(const char* src, int64_t n, char* grid) const {
  const size_t pixel = static_cast<size_t>(d_.in_channels) * element_;
  const size_t row = static_cast<size_t>(w_.grid) * pixel;
  const size_t real = static_cast<size_t>(w_.in) * pixel;
#pragma omp parallel for schedule(static) if (grid_pixels_ * d_.in_channels >= (1 << 16))
  for (int64_t r = 0; r < h_.grid; ++r) {
    char* to = grid + static_cast<size_t>(r) * row;
    if (r >= h_.in) {
      std::memset(to, 0, row);
      continue;
    }
    std::memcpy(to, src + static_cast<size_t>((n * h_.in + r) * w_.in) * pixel, real);
    std::memset(to + real, 0, row - real);
  }
}

int64_t PhaseWeightGrad::phase_source(int64_t ah, int64_t aw, int64_t row, int64_t col) const {
  const int64_t oh = h_.stride * (row - h_.lo) + ah, ow = w_.stride * (col - w_.lo) + aw;
  if (row < h_.lo || col < w_.lo || oh >= h_.out || ow >= w_.out) return -1;
  return oh * w_.out + ow;
}

// Grid position (row, col) of phase (ah, aw) holds dY at (s*(row - lo) + ah, s*(col - lo) + aw)
// of sample n, or zero where that is outside the output; the tail after the grid is zero.
void PhaseWeightGrad::fill_phase(const char* diff_dst, int64_t n, int64_t ah, int64_t aw,
                                 char* grid) const {
  const size_t pixel = static_cast<size_t>(d_.out_channels) * element_;
  const char* sample = diff_dst + static_cast<size_t>(n * h_.out * w_.out) * pixel;
#pragma omp parallel for schedule(static) if (grid_pixels_ * d_.out_channels >= (1 << 16))
  for (int64_t r = 0; r < h_.grid; ++r)
    for (int64_t c = 0; c < w_.grid; ++c) {
      char* to = grid + static_cast<size_t>(r * w_.grid + c) * pixel;
      const int64_t from = phase_source(ah, aw, r, c);
      if (from < 0)
        std::memset(to, 0, pixel);
      else
        std::memcpy(to, sample + static_cast<size_t>(from) * pixel, pixel);
    }
  std::memset(grid + static_cast<size_t>(grid_pixels_) * pixel, 0,
              static_cast<size_t>(tail_pixels_) * pixel);
}

void PhaseWeightGrad::run(const void* src, const void* diff_dst, float* diff_weights,
                          void* scratch) {
  const int64_t in_c = d_.in_channels, out_c = d_.out_channels;
  const int64_t taps = d_.kernel[0] * d_.kernel[1];
  const auto slice = static_cast<size_t>(in_c * out_c);
  const size_t out_pixel = static_cast<size_t>(out_c) * element_;
  ScratchCarver carve(scratch);
  auto* x = static_cast<char*>(carve.take(static_cast<size_t>(grid_pixels_ * in_c) * element_));
  auto* y = static_cast<char*>(
      carve.take(static_cast<size_t>((grid_pixels_ + tail_pixels_) * out_c) * element_));
  auto* per_tap =
      static_cast<float*>(carve.take(static_cast<size_t>(taps) * slice * sizeof(float)));
  void* matmul_scratch =
      carve.take(std::max(first_.scratchpad_bytes(), accumulate_.scratchpad_bytes()));
  for (int64_t n = 0; n < d_.n; ++n) {
    fill_input(static_cast<const char*>(src), n, x);
    BoundPrimitive& matmul = n == 0 ? first_ : accumulate_;
    for (int64_t ah = 0; ah < h_.stride; ++ah)
      for (int64_t aw = 0; aw < w_.stride; ++aw) {
        bool filled = false;
        for (int64_t kh = 0; kh < d_.kernel[0]; ++kh)
          for (int64_t kw = 0; kw < d_.kernel[1]; ++kw) {
            const auto ku = static_cast<size_t>(kh), kv = static_cast<size_t>(kw);
            if (h_.phase[ku] != ah || w_.phase[kv] != aw) continue;
            if (!filled) fill_phase(static_cast<const char*>(diff_dst), n, ah, aw, y);
            filled = true;
            const int64_t offset = (h_.shift[ku] + h_.lo) * w_.grid + w_.shift[kv] + w_.lo;
            matmul.set(DNNL_ARG_SRC, x);
            matmul.set(DNNL_ARG_WEIGHTS, y + static_cast<size_t>(offset) * out_pixel);
            matmul.set(DNNL_ARG_DST, per_tap + static_cast<size_t>(kh * d_.kernel[1] + kw) * slice);
            matmul.run(matmul_scratch);
          }
      }
  }
  interleave_taps(per_tap, taps, in_c, out_c, diff_weights);  // crest's [in][out][tap]
}

}  // namespace crest::onednn
