// cuDNN descriptor wrappers.
#include "cuda/cudnn_descriptors.hpp"

#include "cuda/check.hpp"
#include "cuda/context.hpp"

namespace crest::cuda {

std::vector<int> cudnn_extents(const int64_t* values, int rank, int fill) {
  std::vector<int> out(values, values + rank);
  while (out.size() < 2) out.push_back(fill);
  return out;
}

namespace {

// Packed strides of [n, c, spatial...] dims: row-major, or with the channels innermost.
std::vector<int> packed_strides(const std::vector<int>& dims, Layout layout) {
  std::vector<int> strides(dims.size(), 1);
  if (layout != Layout::channels_last) {
    for (size_t i = dims.size() - 1; i > 0; --i) strides[i - 1] = strides[i] * dims[i];
    return strides;
  }
  strides[1] = 1;
  strides.back() = dims[1];
  for (size_t i = dims.size() - 1; i > 2; --i) strides[i - 1] = strides[i] * dims[i];
  strides[0] = strides[2] * dims[2];
  return strides;
}

}  // namespace

TensorDescriptor::TensorDescriptor(DType dtype, int64_t n, int64_t channels, const int64_t* spatial,
                                   int rank, Layout layout) {
  CREST_CUDNN(cudnnCreateTensorDescriptor(&d_));
  std::vector<int> dims{static_cast<int>(n), static_cast<int>(channels)};
  for (int e : cudnn_extents(spatial, rank, 1)) dims.push_back(e);
  const std::vector<int> strides = packed_strides(dims, layout);
  CREST_CUDNN(cudnnSetTensorNdDescriptor(d_, cudnn_type(dtype), static_cast<int>(dims.size()),
                                         dims.data(), strides.data()));
}

TensorDescriptor::~TensorDescriptor() {
  if (d_) cudnnDestroyTensorDescriptor(d_);
}

FilterDescriptor::FilterDescriptor(DType dtype, int64_t k, int64_t c, const int64_t* spatial,
                                   int rank, Layout layout) {
  CREST_CUDNN(cudnnCreateFilterDescriptor(&d_));
  std::vector<int> dims{static_cast<int>(k), static_cast<int>(c)};
  for (int e : cudnn_extents(spatial, rank, 1)) dims.push_back(e);
  const cudnnTensorFormat_t format =
      layout == Layout::channels_last ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  CREST_CUDNN(cudnnSetFilterNdDescriptor(d_, cudnn_type(dtype), format,
                                         static_cast<int>(dims.size()), dims.data()));
}

FilterDescriptor::~FilterDescriptor() {
  if (d_) cudnnDestroyFilterDescriptor(d_);
}

}  // namespace crest::cuda
