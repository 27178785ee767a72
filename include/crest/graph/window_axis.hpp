// A sliding window along one spatial axis (convolution, pooling): what a windowed layer reads,
// which is what a spatial split must bring from the neighbours (its halo).
#pragma once
#include <cstdint>
#include <vector>

#include "crest/backends/kernels.hpp"

namespace crest {

// Output row o reads input rows o * stride - pad_lo + j * dilation for j in [0, kernel). A
// transposed window (a transposed convolution) runs the other way: input row i writes output
// rows i * stride - pad_lo + j * dilation, so output row o reads the input rows that reach it.
struct WindowAxis {
  int64_t in_extent = 1, out_extent = 1;
  int64_t kernel = 1, stride = 1, dilation = 1, pad_lo = 0;
  bool transposed = false;
};

// The window of a layer's input gradient: the gradient of output row o reaches the input rows o
// reads, so input and output swap and the window runs the other way (transposed flips).
WindowAxis reversed(const WindowAxis& w);

// Per spatial axis, the window of a convolution or pooling descriptor.
std::vector<WindowAxis> window_axes(const ConvDesc& d);
std::vector<WindowAxis> window_axes(const PoolDesc& d);

}  // namespace crest
