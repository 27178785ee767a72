// 3x3 and 5x5 stride-1 convolutions, dilated or not, by Winograd's F(4x4, 3x3) and F(4x4, 5x5)
// (winograd_2d.hpp), and 3x3x3 ones by F(4x4x4, 3x3x3) (winograd_f4x3_3d.hpp), for all three
// training passes: 36 (64, 216) batched matrix products per chunk of tiles, run by oneDNN's
// matmul, with crest's transforms around them.
//
// Why: oneDNN 3.2 has no Winograd convolution for x86 CPUs any more, and its direct kernels run
// DeepCAM's decoder convolutions (304 -> 256 and 256 -> 256 channels, 3x3, at a quarter of the
// input resolution) at the GEMM rate; they were a fifth of a float32 training step at 192x288.
// F(4x4, 3x3) does a quarter of the multiplications; F(4x4, 5x5) a sixth of the Tiramisu's,
// whose 5x5 convolutions were 78 % of its step. Its rounding error is larger than the direct
// sum's (about 1e-5 relative in float32, measured in tests/backend/onednn_winograd_test.cpp), as
// in cuDNN's and oneDNN's former Winograd kernels. So the transforms and products always run in
// float32: bf16 activations (mixed precision) are widened as they are read and rounded as they
// are written, and their results are as close as bf16 allows, closer than oneDNN's bf16 kernel
// (whose weights are rounded to bf16 too).
#pragma once
#include <cstdint>
#include <memory>

#include "crest/backends/kernels.hpp"
#include "onednn/context.hpp"

namespace crest::onednn {

// Whether make_winograd_conv can compute `d`: float32 or bf16 activations, not grouped or
// transposed, stride 1, padding 0 to (taps - 1) dilations before, no fused activation but ReLU or
// leaky ReLU (applied in the output transform), with or without a bias gradient (the output
// gradient's per-channel sum, an extra pass over it; in float32 the compile step often routes it
// elsewhere, after a max pooling, but a spatially split or bf16 convolution keeps it), any
// channel counts (a count that is not a multiple of 16 pads the transformed tiles and takes
// channels-last activations); 2-D 3x3 or 5x5 at any dilation (F(4x4, 3x3), F(4x4, 5x5)), or 3-D
// 3x3x3 undilated (F(4x4x4, 3x3x3), winograd_f4x3_3d.hpp).
bool winograd_serves(const ConvDesc& d);

// The share of the 4x4 tiles' pixels that are real output pixels (the lower of the forward's and
// the data gradient's tilings): tiles past the edge, or phases of a dilated convolution shorter
// than a tile, compute pixels that are dropped.
double winograd_tile_use(const ConvDesc& d);

// The environment's CREST_WINOGRAD: unset or empty, the rule below (or the tuner's measurement)
// decides; "0", nothing runs Winograd (to compare with oneDNN's direct kernels); "1", every
// convolution it serves runs it, tuner or not (to test it where the rule would not take it:
// the parity fixtures' small channel counts). Any other value is a usage error naming it.
enum class WinogradSetting { automatic, off, everywhere };
WinogradSetting winograd_setting();

// Whether make_conv sends `d` there without the tuner (everywhere it serves under
// CREST_WINOGRAD=1, nowhere under 0) (with it, the faster of Winograd and
// oneDNN's direct kernel, measured, wherever winograd_serves(d)): it serves `d`, both channel
// counts are at least kWinogradMinChannels (2-D 3x3), kWinograd5x5MinChannels (5x5) or
// kWinograd3dMinChannels (3-D), the tiles' use is at least kWinogradMinTileUse, (5x5 and 3-D)
// the batch has at least kWinograd5x5MinTiles or kWinograd3dMinTiles tiles (of the output, and
// of the input where the data gradient runs), and, in bf16, oneDNN has no
// AMX kernels: its AMX convolutions run CosmoFlow's bf16 conv2 to conv5 (128^3, batch 2) 3 to 6
// times faster than Winograd's float32 products, while its AVX-512 BF16 ones run conv2 to conv4
// 2 to 4 times slower (docs/performance.md, "3-D Winograd on an AMX Xeon").
bool winograd_applies(const ConvDesc& d);

// Below this many input or output channels the transforms' memory traffic outweighs the saved
// arithmetic (measured: 32 -> 64 channels at 384x576 runs no faster than oneDNN's direct kernel).
constexpr int64_t kWinogradMinChannels = 128;
// The 3-D tiling cuts the arithmetic by 8x, not 4x, so it pays from fewer channels: CosmoFlow's
// conv2 (32 -> 64 channels at 64^3, batch 4) runs 2.4x faster than oneDNN's direct kernel
// (AMD Zen 3, docs/performance.md).
constexpr int64_t kWinograd3dMinChannels = 32;
// Transforming the filters (216 in x out values, 113 MB at 256 -> 512 channels) costs the same
// however few tiles there are: CosmoFlow's conv5 took 120 ms against the direct kernel's 90 at 4
// tiles (4^3, batch 4) and 113 against 229 at 16 (8^3, batch 2).
constexpr int64_t kWinograd3dMinTiles = 8;

// F(4x4, 5x5) cuts the multiplications by 6.25x, so it pays from few channels too: the
// Tiramisu's dense layers (16 to 400 channels -> 32 at 96x144, batch 2) ran 1.3 to 1.7x faster
// than oneDNN's direct kernel over the three passes, its first convolution (16 -> 64) 1.06x
// (AVX-512 Xeon, docs/performance.md). On small maps the filters' transform (64 in x out values)
// and the matmuls' fixed costs win: at 12x18 (30 tiles) it ran 1.0 to 1.2x, at 6x9 (12 tiles)
// 0.5 to 0.6x.
constexpr int64_t kWinograd5x5MinChannels = 16;
constexpr int64_t kWinograd5x5MinTiles = 24;

// At half the tiles' pixels used, F(4x4, 3x3) still does half the direct kernel's
// multiplications, before the transforms. DeepCAM's aspp2 (dilation 6) on the 12x18 feature map
// of a 192x288 input uses 6 of each 16 (a 2x3 phase in a 4x4 tile) and stays direct; on the 48x72
// map of 768x1152 it uses all, aspp3 (dilation 12) 3/4 and aspp4 (dilation 18) 2/3.
constexpr double kWinogradMinTileUse = 0.5;

// Each transformed buffer of a chunk of tiles holds at most about this many floats (32 MB), so the
// scratch stays bounded at any resolution, while a chunk keeps enough tiles (matrix rows) for
// the matmuls: at 2048 input channels (DeepCAM's ASPP at 768x1152) 8 MB chunks held 28 tiles and
// aspp2-4 took 1.35 s per step against 0.73-0.84 s with 32 MB; at 304 channels both ran alike.
constexpr int64_t kWinogradChunkFloats = int64_t{1} << 23;

// `chunk_floats`: tests make it small to get several chunks from a small problem.
std::unique_ptr<ConvKernel> make_winograd_conv(const ContextPtr& ctx, const ConvDesc& d,
                                               int64_t chunk_floats = kWinogradChunkFloats);

}  // namespace crest::onednn
