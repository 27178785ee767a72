// The CUDA backend's context: device discovery with a reason when there is none, and the stream
// and library handles every kernel uses.
#include "cuda/context.hpp"

#include <cstdlib>
#include <string>

#include "crest/core/env_setting.hpp"
#include "cuda/check.hpp"

namespace crest::cuda {

Context::~Context() {
  // Destructors must not throw: errors here are ignored (the process is ending or the context is
  // being dropped after an earlier error that was already reported).
  if (cudnn) cudnnDestroy(cudnn);
  if (cublas_lt) cublasLtDestroy(cublas_lt);
  if (cublas) cublasDestroy(cublas);
  if (cublas_workspace) cudaFree(cublas_workspace);
  for (cudaStream_t s : {copy_stream, stream})
    if (s) {
      cudaStreamSynchronize(s);
      cudaStreamDestroy(s);
    }
}

Support device_available() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();
    const bool no_driver = err == cudaErrorInsufficientDriver || err == cudaErrorNoDevice;
    return Support::no(std::string("no usable CUDA device: ") + cudaGetErrorName(err) + " (" +
                       cudaGetErrorString(err) + ")" +
                       (no_driver ? ": this machine has no NVIDIA GPU, or no driver for it" : ""));
  }
  if (count == 0) return Support::no("no CUDA device is visible (CUDA_VISIBLE_DEVICES?)");
  const size_t version = cudnnGetVersion();
  if (version < 90000)
    return Support::no("cuDNN " + std::to_string(version) +
                       " is loaded; the backend needs cuDNN 9");
  return Support::yes();
}

namespace {

// A rank's GPU: where the launcher leaves several visible (mpirun without a GPU binding), the
// node-local rank modulo their count, so a node's ranks spread over its GPUs; srun
// --gpus-per-task, jsrun and CUDA_VISIBLE_DEVICES per rank leave one, device 0.
int device_of_this_rank(int visible) {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID",
                           "PMI_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_RANK", "PALS_LOCAL_RANKID"})
    if (const char* v = std::getenv(name)) return visible > 0 ? std::atoi(v) % visible : 0;
  return 0;
}

bool tf32_requested() {
  return env_setting<bool>("CREST_CUDA_TF32", {{"", false, "strict float32"},
                                               {"0", false, "strict float32"},
                                               {"1", true, "TF32 on the tensor cores"}});
}

LayoutChoice layouts_requested() {
  return env_setting<LayoutChoice>(
      "CREST_CUDA_LAYOUT",
      {{"", LayoutChoice::follow, "as follow"},
       {"follow", LayoutChoice::follow, "the producer's layout on the tensor cores"},
       {"plain", LayoutChoice::plain, "every kernel plain"},
       {"channels_last", LayoutChoice::channels_last, "every kernel that can channels-last"}});
}

}  // namespace

Layout computed_layout(const Context& c, const MemFormat& hint, DType dtype) {
  switch (c.layouts) {
    case LayoutChoice::plain:
      return Layout::plain;
    case LayoutChoice::channels_last:
      return Layout::channels_last;
    case LayoutChoice::follow:
      break;
  }
  // Strict float32 runs on the CUDA cores, where channels-last gains little and crest's own
  // weight gradient (plain) measured fastest on CosmoFlow's first layer (docs/cuda.md).
  const bool tensor_cores = is_half(dtype) || c.tf32;
  return hint.layout == Layout::channels_last && tensor_cores ? Layout::channels_last
                                                              : Layout::plain;
}

std::shared_ptr<Context> open_context() {
  const Support s = device_available();
  if (!s) throw_usage("backend 'cuda' cannot run on this machine: " + s.reason);
  auto c = std::make_shared<Context>();
  c->tf32 = tf32_requested();
  c->layouts = layouts_requested();
  int visible = 0;
  CREST_CUDA(cudaGetDeviceCount(&visible));
  CREST_CUDA(cudaSetDevice(device_of_this_rank(visible)));
  CREST_CUDA(cudaGetDevice(&c->device));
  CREST_CUDA(cudaGetDeviceProperties(&c->properties, c->device));
  CREST_CUDA(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
  CREST_CUDA(cudaStreamCreateWithFlags(&c->copy_stream, cudaStreamNonBlocking));
  CREST_CUBLAS(cublasCreate(&c->cublas));
  CREST_CUBLAS(cublasSetStream(c->cublas, c->stream));  // before the workspace: it resets it
  CREST_CUDA(cudaMalloc(&c->cublas_workspace, Context::kCublasWorkspaceBytes));
  CREST_CUBLAS(cublasSetWorkspace(c->cublas, c->cublas_workspace, Context::kCublasWorkspaceBytes));
  // No TF32 in float32 GEMMs unless asked: float32 results stay within the reference's 1e-5
  // (docs/cuda.md).
  CREST_CUBLAS(
      cublasSetMathMode(c->cublas, c->tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  CREST_CUBLAS(cublasLtCreate(&c->cublas_lt));
  CREST_CUDNN(cudnnCreate(&c->cudnn));
  CREST_CUDNN(cudnnSetStream(c->cudnn, c->stream));
  return c;
}

std::string machine_signature(const Context& c) {
  int runtime = 0, blas = 0;
  CREST_CUDA(cudaRuntimeGetVersion(&runtime));
  CREST_CUBLAS(cublasGetVersion(c.cublas, &blas));
  return std::string(c.properties.name) + " sm_" + std::to_string(c.properties.major) +
         std::to_string(c.properties.minor) + "; cuDNN " + std::to_string(cudnnGetVersion()) +
         " cuBLAS " + std::to_string(blas) + " CUDA " + std::to_string(runtime);
}

cudnnDataType_t cudnn_type(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return CUDNN_DATA_FLOAT;
    case DType::f64:
      return CUDNN_DATA_DOUBLE;
    case DType::bf16:
      return CUDNN_DATA_BFLOAT16;
    case DType::f16:
      return CUDNN_DATA_HALF;
    default:
      break;
  }
  throw_usage(std::string("the cuda backend has no cuDNN type for ") + dtype_name(dtype));
}

}  // namespace crest::cuda
