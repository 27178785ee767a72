// Private to the CUDA backend: owning wrappers of cuDNN's legacy descriptors, so a kernel that
// throws half-way through its construction leaks nothing.
#pragma once
#include <cudnn.h>

#include <array>
#include <cstdint>
#include <vector>

#include "crest/core/dtype.hpp"
#include "crest/core/tensor.hpp"

namespace crest::cuda {

// A packed tensor of n, channels and up to three spatial extents, plain (NC + spatial) or
// channels-last (N + spatial + C: cuDNN's NHWC/NDHWC, told by the strides). cuDNN wants at least 4
// dimensions, so a 1-D problem gets a trailing extent of 1.
class TensorDescriptor {
 public:
  TensorDescriptor(DType dtype, int64_t n, int64_t channels, const int64_t* spatial, int rank,
                   Layout layout = Layout::plain);
  ~TensorDescriptor();
  TensorDescriptor(const TensorDescriptor&) = delete;
  TensorDescriptor& operator=(const TensorDescriptor&) = delete;
  cudnnTensorDescriptor_t get() const { return d_; }

 private:
  cudnnTensorDescriptor_t d_ = nullptr;
};

// Convolution weights [k, c, spatial...]: plain, or channels-last ([k, spatial..., c], cuDNN's
// NHWC filter format, what its tensor-core kernels read beside channels-last tensors).
class FilterDescriptor {
 public:
  FilterDescriptor(DType dtype, int64_t k, int64_t c, const int64_t* spatial, int rank,
                   Layout layout = Layout::plain);
  ~FilterDescriptor();
  FilterDescriptor(const FilterDescriptor&) = delete;
  FilterDescriptor& operator=(const FilterDescriptor&) = delete;
  cudnnFilterDescriptor_t get() const { return d_; }

 private:
  cudnnFilterDescriptor_t d_ = nullptr;
};

// Extents as cuDNN's int arrays, padded to at least 2 spatial dimensions with `fill`.
std::vector<int> cudnn_extents(const int64_t* values, int rank, int fill);

}  // namespace crest::cuda
