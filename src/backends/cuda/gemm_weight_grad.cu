// A convolution's weight gradient as matrix products (gemm_weight_grad.hpp): the input's patches
// gathered into columns (im2col), a chunk of output positions at a time, and
// dW (C_out x C_in*K) += dY_chunk (C_out x rows) * columns (rows x C_in*K) through cuBLAS, the
// chunks added in a fixed order. cuDNN's deterministic weight-gradient algorithm is slow when
// C_in*K is small (CosmoFlow's first layer: 4 channels, 3x3x3 over 128^3); this one is chosen
// when it measures faster (conv_algorithms.cpp).
#include <algorithm>

#include "cuda/check.hpp"
#include "cuda/gemm_weight_grad.hpp"
#include "cuda/launch.cuh"

namespace crest::cuda {
namespace {

// The geometry on the device: (d, h, w) with missing leading axes of extent 1.
struct Axes3 {
  int64_t d, h, w;
};

Axes3 axes(const std::array<int64_t, 3>& v, int rank, int64_t missing) {
  if (rank == 1) return {missing, missing, v[0]};
  if (rank == 2) return {missing, v[0], v[1]};
  return {v[0], v[1], v[2]};
}

struct Im2col {
  Axes3 in, out, kernel, stride, dilation, pad;
  int64_t channels;
};

// columns[r][(c, kd, kh, kw)] for output positions first .. first + rows of one sample: the
// input value under that kernel tap, or 0 in the padding.
__global__ void gather_columns(const float* x, Im2col g, int64_t first, size_t rows,
                               float* columns) {
  const int64_t taps = g.kernel.d * g.kernel.h * g.kernel.w;
  const size_t row_length = static_cast<size_t>(g.channels * taps);
  const size_t count = rows * row_length;
  for (size_t i = first_index(); i < count; i += grid_stride()) {
    const auto k = static_cast<int64_t>(i % row_length);
    const int64_t p = first + static_cast<int64_t>(i / row_length);  // output position
    const int64_t c = k / taps, tap = k % taps;
    const int64_t kw = tap % g.kernel.w, kh = tap / g.kernel.w % g.kernel.h,
                  kd = tap / g.kernel.w / g.kernel.h;
    const int64_t ow = p % g.out.w, oh = p / g.out.w % g.out.h, od = p / g.out.w / g.out.h;
    const int64_t z = od * g.stride.d + kd * g.dilation.d - g.pad.d;
    const int64_t y = oh * g.stride.h + kh * g.dilation.h - g.pad.h;
    const int64_t xw = ow * g.stride.w + kw * g.dilation.w - g.pad.w;
    const bool inside = z >= 0 && z < g.in.d && y >= 0 && y < g.in.h && xw >= 0 && xw < g.in.w;
    columns[i] = inside ? x[((c * g.in.d + z) * g.in.h + y) * g.in.w + xw] : 0.f;
  }
}

int64_t volume(const Axes3& a) { return a.d * a.h * a.w; }

}  // namespace

size_t GemmWeightGrad::row_length() const {
  int64_t taps = 1;
  for (int a = 0; a < rank; ++a) taps *= kernel[static_cast<size_t>(a)];
  return static_cast<size_t>(in_channels * taps);
}

size_t GemmWeightGrad::positions() const {
  int64_t p = 1;
  for (int a = 0; a < rank; ++a) p *= out_size[static_cast<size_t>(a)];
  return static_cast<size_t>(p);
}

size_t GemmWeightGrad::chunk_rows() const {
  const size_t budget = column_bytes / (row_length() * sizeof(float));
  return std::max<size_t>(1, std::min(positions(), budget));
}

size_t GemmWeightGrad::scratch_bytes() const { return chunk_rows() * row_length() * sizeof(float); }

void GemmWeightGrad::run(cublasHandle_t blas, cudaStream_t stream, const float* x, const float* dy,
                         float* dw, float* columns) const {
  const Im2col g{axes(in_size, rank, 1),
                 axes(out_size, rank, 1),
                 axes(kernel, rank, 1),
                 axes(stride, rank, 1),
                 axes(dilation, rank, 1),
                 axes(pad, rank, 0),
                 in_channels};
  const size_t length = row_length(), total = positions(), chunk = chunk_rows();
  const auto in_sample = static_cast<size_t>(in_channels * volume(g.in));
  const float one = 1.f, zero = 0.f;
  bool first_product = true;
  for (int64_t s = 0; s < n; ++s) {
    for (size_t p0 = 0; p0 < total; p0 += chunk) {
      const size_t rows = std::min(chunk, total - p0);
      const size_t count = rows * length;
      gather_columns<<<grid_for(count, kThreads), kThreads, 0, stream>>>(
          x + static_cast<size_t>(s) * in_sample, g, static_cast<int64_t>(p0), rows, columns);
      CREST_CUDA_LAUNCHED();
      // Column-major: dW^T (length x C_out) (+)= columns^T (length x rows) * dY_chunk^T.
      const float* dy_chunk = dy + (static_cast<size_t>(s) * out_channels) * total + p0;
      CREST_CUBLAS(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(length),
                               static_cast<int>(out_channels), static_cast<int>(rows), &one,
                               columns, static_cast<int>(length), dy_chunk, static_cast<int>(total),
                               first_product ? &zero : &one, dw, static_cast<int>(length)));
      first_product = false;
    }
  }
}

}  // namespace crest::cuda
