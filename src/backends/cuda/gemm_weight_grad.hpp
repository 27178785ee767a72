// Private to the CUDA backend: a convolution's weight gradient through im2col and cuBLAS
// (gemm_weight_grad.cu), for the problems where it is faster than cuDNN's deterministic
// algorithm. One group, float32, cuDNN's forward direction: x is conv_in [n, in_channels, in...]
// already padded to what cuDNN pads (`pad` both sides), dy is conv_out's gradient, dW is
// [out_channels, in_channels, kernel...].
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <cstdint>

namespace crest::cuda {

struct GemmWeightGrad {
  // The columns of one chunk of output positions live in scratch of at most `column_bytes`.
  static constexpr size_t kColumnBytes = size_t{256} << 20;

  int rank = 3;
  int64_t n = 1, in_channels = 1, out_channels = 1;
  std::array<int64_t, 3> in_size{1, 1, 1}, out_size{1, 1, 1}, kernel{1, 1, 1}, stride{1, 1, 1},
      dilation{1, 1, 1}, pad{0, 0, 0};

  size_t row_length() const;  // in_channels times the kernel's taps
  size_t positions() const;   // output positions per sample
  size_t column_bytes = kColumnBytes;

  size_t chunk_rows() const;
  size_t scratch_bytes() const;  // the columns of one chunk
  void run(cublasHandle_t blas, cudaStream_t stream, const float* x, const float* dy, float* dw,
           float* columns) const;
};

}  // namespace crest::cuda
