// Private to the CUDA backend: what every CUDA kernel of one backend shares — the device, the
// stream all work is issued on, and the cuBLAS, cuBLASLt and cuDNN handles (cuBLASLt's calls
// name the stream). One context per backend object; its kernels keep it alive (shared_ptr) for
// as long as they live.
#pragma once
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "crest/backends/kernels.hpp"
#include "tuned_choices.hpp"

namespace crest::cuda {

// Which layout the convolutions, batch norms and poolings compute in (CREST_CUDA_LAYOUT):
// `follow` (the default) their producer's where they run on the tensor cores (16-bit values, or
// float32 under TF32: a network fed channels-last batches then computes channels-last throughout,
// the order cuDNN's tensor-core kernels read without transposing), else plain; or always `plain`
// or always `channels_last` (what the tests use to cover each).
enum class LayoutChoice : uint8_t { follow, plain, channels_last };

struct Context {
  int device = 0;
  cudaDeviceProp properties{};
  cudaStream_t stream = nullptr;
  // Where host-to-device copies that overlap the compute run (DeviceMemory::start_copy_to_device):
  // the next step's batch while this one computes.
  cudaStream_t copy_stream = nullptr;
  cublasHandle_t cublas = nullptr;
  cublasLtHandle_t cublas_lt = nullptr;  // the dense layers' products (dense.cpp)
  // cuBLAS's workspace, fixed (cublasSetWorkspace): a recorded step (a CUDA graph) then holds no
  // allocation of cuBLAS's own, and recording every step allocates nothing.
  void* cublas_workspace = nullptr;
  static constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;  // NVIDIA's advice for Hopper
  cudnnHandle_t cudnn = nullptr;
  // CREST_CUDA_TF32=1: float32 convolutions and matrix products may run on the tensor cores in
  // TF32 (inputs rounded to 10 mantissa bits, float32 accumulation). Off by default: float32
  // stays strict and agrees with the reference to 1e-5.
  bool tf32 = false;
  LayoutChoice layouts = LayoutChoice::follow;
  // The run's kept choices (the cuDNN algorithms; Backend::set_layout_tuning), read by the
  // convolutions made afterwards; null before.
  std::shared_ptr<TunedChoices> tuned;

  Context() = default;
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  ~Context();
};

// Whether this process can run the CUDA backend, and why not: a driver and a device the runtime
// sees, and cuDNN/cuBLAS that load. Asks without creating anything that lasts.
Support device_available();

// Opens this rank's device (device 0, or the node-local rank modulo the visible devices where a
// launcher says the local rank: CUDA_VISIBLE_DEVICES or the launcher's binding narrows them):
// a non-blocking stream and both library handles on it, a second stream for overlapped copies, TF32
// as CREST_CUDA_TF32 says (0 or 1) and the layouts as CREST_CUDA_LAYOUT does (another value is a
// usage error naming the variable). Throws
// crest::Error (usage) with device_available()'s reason when the machine cannot run it.
std::shared_ptr<Context> open_context();

// The layout a kernel of values of `dtype` computes in, given the format its producer hands it
// (plain or channels-last; a kernel that cannot compute channels-last asks for plain instead).
Layout computed_layout(const Context& c, const MemFormat& hint, DType dtype);

// What a measured cuDNN choice depends on besides the problem: the GPU, its compute capability,
// the cuDNN, cuBLAS (the im2col weight gradient) and CUDA runtime versions.
std::string machine_signature(const Context& c);

// The cuDNN data type of a crest dtype (f32, f64, bf16, f16).
cudnnDataType_t cudnn_type(DType dtype);

}  // namespace crest::cuda
