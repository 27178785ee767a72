// `crest bench peak --backend cuda`: the device's matrix rate through cuBLAS, timed with CUDA
// events around each n x n x n product (best of `iters`, after one untimed warm-up). float32
// runs without TF32, as the backend's kernels do, or in TF32 where CREST_CUDA_TF32=1 lets them;
// bf16 and fp16 run on the tensor cores with float32 accumulation: the ceiling a
// mixed-precision step is measured against.
#include <algorithm>
#include <string>

#include "cuda/check.hpp"
#include "cuda/cuda_kernels.hpp"

namespace crest::cuda {
namespace {

struct GemmTypes {
  cudaDataType_t data;
  size_t bytes;
};

bool gemm_types(DType dtype, GemmTypes& t) {
  switch (dtype) {
    case DType::f32:
      t = {CUDA_R_32F, 4};
      return true;
    case DType::bf16:
      t = {CUDA_R_16BF, 2};
      return true;
    case DType::f16:
      t = {CUDA_R_16F, 2};
      return true;
    default:
      return false;
  }
}

// Owns one device allocation for the timing.
struct DeviceBlock {
  void* p = nullptr;
  explicit DeviceBlock(size_t bytes) { CREST_CUDA(cudaMalloc(&p, bytes)); }
  ~DeviceBlock() { cudaFree(p); }
  DeviceBlock(const DeviceBlock&) = delete;
  DeviceBlock& operator=(const DeviceBlock&) = delete;
};

struct Event {
  cudaEvent_t e = nullptr;
  Event() { CREST_CUDA(cudaEventCreate(&e)); }
  ~Event() { cudaEventDestroy(e); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
};

}  // namespace

PeakRate gemm_peak(Context& c, DType dtype, int64_t n, int iters) {
  GemmTypes t{};
  if (!gemm_types(dtype, t))
    return {false, 0, "the cuda backend times f32, bf16 and f16 products only"};
  const int m = static_cast<int>(n);
  const size_t bytes = static_cast<size_t>(n) * static_cast<size_t>(n) * t.bytes;
  DeviceBlock a(bytes), b(bytes), out(bytes);
  // Zeros would flatter the tensor cores' power draw; any bytes do for a rate.
  CREST_CUDA(cudaMemsetAsync(a.p, 0x3c, bytes, c.stream));
  CREST_CUDA(cudaMemsetAsync(b.p, 0x3c, bytes, c.stream));
  const float one = 1.f, zero = 0.f;
  const cublasComputeType_t compute = dtype != DType::f32 ? CUBLAS_COMPUTE_32F
                                      : c.tf32            ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                          : CUBLAS_COMPUTE_32F_PEDANTIC;
  auto product = [&] {
    CREST_CUBLAS(cublasGemmEx(c.cublas, CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &one, a.p, t.data, m,
                              b.p, t.data, m, &zero, out.p, t.data, m, compute,
                              CUBLAS_GEMM_DEFAULT));
  };
  product();
  Event start, stop;
  float best_ms = 0;
  for (int i = 0; i < std::max(iters, 1); ++i) {
    CREST_CUDA(cudaEventRecord(start.e, c.stream));
    product();
    CREST_CUDA(cudaEventRecord(stop.e, c.stream));
    CREST_CUDA(cudaEventSynchronize(stop.e));
    float ms = 0;
    CREST_CUDA(cudaEventElapsedTime(&ms, start.e, stop.e));
    if (i == 0 || ms < best_ms) best_ms = ms;
  }
  const double flops =
      2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  return {true, flops / (static_cast<double>(best_ms) * 1e-3) / 1e9,
          std::string("cublasGemmEx ") + (dtype != DType::f32 ? "tensor cores"
                                          : c.tf32            ? "fp32 (TF32, CREST_CUDA_TF32=1)"
                                                              : "fp32 (no TF32)")};
}

}  // namespace crest::cuda
