// 3x3 stride-1 convolutions by Winograd's F(4x4, 3x3) (winograd_f4x3.hpp) for all three training
// passes: 36 batched matrix products per chunk of tiles, run by oneDNN's matmul, with crest's
// transforms around them.
//
// Why: oneDNN 3.2 has no Winograd convolution for x86 CPUs any more, and its direct kernels run
// DeepCAM's decoder convolutions (304 -> 256 and 256 -> 256 channels, 3x3, at a quarter of the
// input resolution) at the float32 GEMM rate; they were about a third of a float32 training step.
// F(4x4, 3x3) does a quarter of the multiplications. Its rounding error is larger than the direct
// sum's (about 1e-5 relative in float32, measured in winograd_conv_test.cpp), as in cuDNN's and
// oneDNN's former Winograd kernels, so it serves float32 only: bf16 inputs would lose too much in
// the transforms.
#pragma once
#include <cstdint>
#include <memory>

#include "crest/backends/kernels.hpp"
#include "onednn/context.hpp"

namespace crest::onednn {

// Whether make_winograd_conv serves `d`: 2-D, float32, 3x3, stride 1, not dilated, not grouped
// or transposed, padding 0 to 2 before, no fused activation, no bias gradient wanted (the
// compile step routes it elsewhere), both channel counts multiples of 16 and at least
// kWinogradMinChannels. Set CREST_WINOGRAD=0 in the environment to turn it off (to compare).
bool winograd_applies(const ConvDesc& d);

// Below this many input or output channels the transforms' memory traffic outweighs the saved
// arithmetic (measured: 32 -> 64 channels at 384x576 runs no faster than oneDNN's direct kernel).
constexpr int64_t kWinogradMinChannels = 128;

// Each transformed buffer of a chunk of tiles holds at most about this many floats (8 MB): the
// tiles of a chunk are transformed, multiplied and transformed back while they are still in the
// caches, and the scratch stays small at any resolution.
constexpr int64_t kWinogradChunkFloats = int64_t{1} << 21;

// `chunk_floats`: tests make it small to get several chunks from a small problem.
std::unique_ptr<ConvKernel> make_winograd_conv(ContextPtr ctx, const ConvDesc& d,
                                               int64_t chunk_floats = kWinogradChunkFloats);

}  // namespace crest::onednn
