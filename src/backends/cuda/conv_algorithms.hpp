// Private to the CUDA backend: how a convolution's three cuDNN algorithms are chosen.
//
// `measured` (the default) runs every algorithm cuDNN offers once on scratch tensors of the
// layer's extents (cudnnFind*AlgorithmEx) and takes the fastest deterministic one whose workspace
// fits; the answer is kept per problem for the life of the process, so a model's repeated layers
// and a second executor (validation, inference) measure nothing again, and in the run's tuned
// choices (ConvProblem::tuned), so a resumed run takes the same algorithms. `heuristic` takes
// cuDNN's heuristic ranking without running anything. Measuring also times crest's own weight
// gradient (im2col and cuBLAS, gemm_weight_grad.hpp) where it applies, and takes it when it is
// faster than cuDNN's; `im2col` takes it wherever it applies, the heuristics elsewhere (what the
// tests use to check it). CREST_CUDNN_ALGORITHMS=measured|heuristic|im2col selects (docs/cuda.md).
// Deterministic algorithms only, in every mode, so a step repeats bit for bit.
#pragma once
#include <cublas_v2.h>
#include <cudnn.h>

#include <cstddef>
#include <string>

#include "cuda/gemm_weight_grad.hpp"
#include "tuned_choices.hpp"

namespace crest::cuda {

// One convolution in cuDNN's forward direction (conv_in -> conv_out), the descriptors the kernel
// owns, the passes it will run and the bytes of each tensor.
struct ConvProblem {
  cudnnHandle_t handle = nullptr;
  cudnnTensorDescriptor_t in = nullptr, out = nullptr;
  cudnnFilterDescriptor_t filter = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  bool fwd = false, bwd_data = false, bwd_filter = false;
  size_t in_bytes = 0, out_bytes = 0, filter_bytes = 0;
  std::string key;  // every field that defines the problem (the cache's key)
  // The weight gradient through im2col and cuBLAS, where it applies (else null).
  const GemmWeightGrad* gemm = nullptr;
  cublasHandle_t blas = nullptr;
  // The run's kept choices (Backend::set_layout_tuning; null without): a measured choice goes
  // into the run's record (and, under crest.autotune, the machine's cache), and a resumed run
  // takes its record's choice instead of measuring, so it computes as the run it continues.
  TunedChoices* tuned = nullptr;
};

struct ConvAlgorithms {
  cudnnConvolutionFwdAlgo_t fwd = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  cudnnConvolutionBwdDataAlgo_t bwd_data = CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
  cudnnConvolutionBwdFilterAlgo_t bwd_filter = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1;
  bool bwd_filter_gemm = false;  // the weight gradient through ConvProblem::gemm instead
  // Its scratch per chunk of columns: small when forced (`im2col`), so that tests cover several
  // chunks per sample.
  size_t gemm_column_bytes = GemmWeightGrad::kColumnBytes;
  size_t workspace_bytes = 0;  // the largest of the chosen algorithms'
  bool measured = false;
};

// Throws CudnnUnsupported (check.hpp) where cuDNN has no deterministic algorithm for a pass, or
// cannot run the problem at all (in this layout, say).
ConvAlgorithms choose_conv_algorithms(const ConvProblem& p);

}  // namespace crest::cuda
