// Error checks for the CUDA runtime, cuBLAS and cuDNN: every call's status is checked, and a
// failure becomes crest::Error naming the call, the library's own text and where it happened.
// Out-of-memory is an input error (exit 2: the user can shrink the batch or the sample); anything
// else is a runtime error (exit 1).
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <string>

#include "crest/core/error.hpp"

namespace crest::cuda {

[[noreturn]] void fail_cuda(cudaError_t err, const char* call, const char* file, int line);
[[noreturn]] void fail_cublas(cublasStatus_t st, const char* call, const char* file, int line);
[[noreturn]] void fail_cudnn(cudnnStatus_t st, const char* call, const char* file, int line);

// cuDNN cannot run a problem as it is described (CUDNN_STATUS_NOT_SUPPORTED and its refinements,
// or no deterministic algorithm for a pass): a runtime error, which a caller with another way to
// run it catches (a convolution asked for channels-last then computes plain).
class CudnnUnsupported : public Error {
 public:
  explicit CudnnUnsupported(const std::string& message) : Error(ErrorKind::runtime, message) {}
};

}  // namespace crest::cuda

#define CREST_CUDA(call)                                                    \
  do {                                                                      \
    const cudaError_t crest_cuda_err_ = (call);                             \
    if (crest_cuda_err_ != cudaSuccess)                                     \
      ::crest::cuda::fail_cuda(crest_cuda_err_, #call, __FILE__, __LINE__); \
  } while (0)

#define CREST_CUBLAS(call)                                                     \
  do {                                                                         \
    const cublasStatus_t crest_cublas_st_ = (call);                            \
    if (crest_cublas_st_ != CUBLAS_STATUS_SUCCESS)                             \
      ::crest::cuda::fail_cublas(crest_cublas_st_, #call, __FILE__, __LINE__); \
  } while (0)

#define CREST_CUDNN(call)                                                    \
  do {                                                                       \
    const cudnnStatus_t crest_cudnn_st_ = (call);                            \
    if (crest_cudnn_st_ != CUDNN_STATUS_SUCCESS)                             \
      ::crest::cuda::fail_cudnn(crest_cudnn_st_, #call, __FILE__, __LINE__); \
  } while (0)

// A kernel launch: the launch's own error (bad configuration), checked at once.
#define CREST_CUDA_LAUNCHED() CREST_CUDA(cudaGetLastError())
