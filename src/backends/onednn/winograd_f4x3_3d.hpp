// The transforms of Winograd's F(4x4x4, 3x3x3) for 3-D convolutions (CosmoFlow's 3x3x3 layers):
// F(4, 3) (winograd_f4x3_1d.hpp) along each of the three axes. A 4x4x4 output tile of a 3x3x3
// convolution is A^T [(G g G^T) . (B^T d B)] A applied along every axis of its 6x6x6 input patch
// d: 216 products per channel pair where the direct convolution needs 1728, an eighth. Summed
// over input channels the products become 216 matrix products (winograd_conv.cpp); these loops
// move data in and out of the 6x6x6 domain. The rounding error is about the 2-D F(4x4, 3x3)'s:
// up to 2e-5 relative in float32 with 16-48 channels (tests/backend/onednn_winograd_test.cpp),
// where the direct sum stays near 1e-7.
//
// The transformed buffers are [216][rows][channels]: transform point xi = (6 i + j) 6 + k, then
// the tiles of a chunk (tile t at row t - first), then channels, contiguous, their counts padded
// to a multiple of 16 with zeros as in 2-D (winograd_2d.hpp). Tile t =
// ((n tiles_d + tz) tiles_h + ty) tiles_w + tx covers the output voxels 4 tz + i (depth), 4 ty + j
// and 4 tx + k, i, j, k < 4; its patch reads the input from 4 tz - pad_front on (rows and columns
// alike), zeros outside. Voxels of tiles past the output are dropped. Dense only: CosmoFlow's
// convolutions have no dilation.
//
// The weight gradient reads the same bilinear form the other way, as in 2-D (winograd_2d.hpp):
// G^T [(A dY A^T) . (B^T D B)] G along every axis.
#pragma once
#include <array>
#include <cstdint>

#include "onednn/lane_addressing.hpp"
#include "onednn/winograd_f4x3_1d.hpp"

namespace crest::onednn::winograd3d {

constexpr int64_t kPoints = 216;  // 6 x 6 x 6 transform points
constexpr int64_t kTile = 4;      // output voxels per tile side

inline int64_t tiles_along(int64_t size) { return (size + kTile - 1) / kTile; }

// Depth, height, width of a volume.
using Extent = std::array<int64_t, 3>;

// One convolution's tiling: 3x3x3, stride 1, from `in` to `out` (both in lane blocks, their depth
// folded into the rows: voxel (z, y, x) lies at row z * height + y of the Addressing).
struct Grid {
  int64_t samples = 0;
  Extent tiles{}, pad{}, in_size{}, out_size{};
  Addressing in, out;
  int64_t in_channels = 0, out_channels = 0;  // any: the buffers below pad them to 16

  int64_t tiles_total() const { return samples * tiles[0] * tiles[1] * tiles[2]; }
};

Grid grid(int64_t samples, const Addressing& in, const Extent& in_size, const Addressing& out,
          const Extent& out_size, int64_t in_channels, int64_t out_channels, const Extent& pad);

// Activations are float32 or bf16 (uint16_t codes); the transformed tiles are float32 either way.

// The tiles [first, last) of `in`: B^T d B along every axis into v, [216][last - first][in_c].
void input_tiles(const Grid& g, const float* in, int64_t first, int64_t last, float* v);
void input_tiles(const Grid& g, const uint16_t* in, int64_t first, int64_t last, float* v);

// The tiles [first, last) of the output from m, [216][last - first][out_c]: A^T m A along every
// axis, plus `bias` ([out_c]) when not null, through `act`, over the output voxels they cover.
void output_tiles(const Grid& g, const float* m, const float* bias,
                  const winograd::OutputActivation& act, int64_t first, int64_t last, float* out);
void output_tiles(const Grid& g, const float* m, const float* bias,
                  const winograd::OutputActivation& act, int64_t first, int64_t last,
                  uint16_t* out);

// The tiles [first, last) of the output's gradient (laid out as g.out): A dY A^T along every axis
// into tiles, [216][last - first][out_c]; voxels beyond the output count as zero.
void gradient_tiles(const Grid& g, const float* diff_out, int64_t first, int64_t last,
                    float* tiles);
void gradient_tiles(const Grid& g, const uint16_t* diff_out, int64_t first, int64_t last,
                    float* tiles);

// G w G^T along every axis of crest's plain weights w [out_c][in_c][3][3][3]: into u as
// [216][in_c][out_c] for the forward, or (for_data_gradient) of each filter turned by 180 degrees
// along every axis as [216][out_c][in_c] (the input gradient is the convolution of the output
// gradient with those filters, padding 2 - pad).
void filters(const float* w, int64_t out_c, int64_t in_c, bool for_data_gradient, float* u);

// G^T z G along every axis of z [216][out_c][in_c] into the plain weight gradient
// dw [out_c][in_c][3][3][3].
void filter_gradient(const float* z, int64_t out_c, int64_t in_c, float* dw);

}  // namespace crest::onednn::winograd3d
