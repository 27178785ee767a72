// The failure paths of check.hpp's macros.
#include "cuda/check.hpp"

namespace crest::cuda {
namespace {

std::string where(const char* call, const char* file, int line) {
  return std::string(call) + " at " + file + ":" + std::to_string(line);
}

}  // namespace

void fail_cuda(cudaError_t err, const char* call, const char* file, int line) {
  cudaGetLastError();  // clears a sticky launch error so the next call does not report it again
  const std::string text = std::string("CUDA: ") + cudaGetErrorName(err) + " (" +
                           cudaGetErrorString(err) + ") in " + where(call, file, line);
  if (err == cudaErrorMemoryAllocation)
    throw_input(text + ": the device is out of memory (smaller batch, sample or split)");
  throw_runtime(text);
}

void fail_cublas(cublasStatus_t st, const char* call, const char* file, int line) {
  const std::string text = std::string("cuBLAS: ") + cublasGetStatusName(st) + " (" +
                           cublasGetStatusString(st) + ") in " + where(call, file, line);
  if (st == CUBLAS_STATUS_ALLOC_FAILED) throw_input(text + ": the device is out of memory");
  throw_runtime(text);
}

void fail_cudnn(cudnnStatus_t st, const char* call, const char* file, int line) {
  const std::string text =
      std::string("cuDNN: ") + cudnnGetErrorString(st) + " in " + where(call, file, line);
  if (st == CUDNN_STATUS_ALLOC_FAILED) throw_input(text + ": the device is out of memory");
  if (st / 1000 == CUDNN_STATUS_NOT_SUPPORTED / 1000) throw CudnnUnsupported(text);
  throw_runtime(text);
}

}  // namespace crest::cuda
