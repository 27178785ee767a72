// Private to the CUDA backend: owning wrappers of cuDNN's legacy descriptors, so a kernel that
// throws half-way through its construction leaks nothing.
#pragma once
#include <cudnn.h>

#include <array>
#include <cstdint>
#include <vector>

#include "crest/core/dtype.hpp"

namespace crest::cuda {

// A plain (NC + spatial, packed) tensor: n, channels and up to three spatial extents. cuDNN wants
// at least 4 dimensions, so a 1-D problem gets a trailing extent of 1.
class TensorDescriptor {
 public:
  TensorDescriptor(DType dtype, int64_t n, int64_t channels, const int64_t* spatial, int rank);
  ~TensorDescriptor();
  TensorDescriptor(const TensorDescriptor&) = delete;
  TensorDescriptor& operator=(const TensorDescriptor&) = delete;
  cudnnTensorDescriptor_t get() const { return d_; }

 private:
  cudnnTensorDescriptor_t d_ = nullptr;
};

// Convolution weights [k, c, spatial...], plain.
class FilterDescriptor {
 public:
  FilterDescriptor(DType dtype, int64_t k, int64_t c, const int64_t* spatial, int rank);
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
