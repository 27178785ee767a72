// The 2-D Winograd tilings F(4x4, 3x3) and F(4x4, 5x5) (Lavin & Gray, "Fast Algorithms for
// Convolutional Neural Networks", 2016), on 16-channel lane blocks (lane_addressing.hpp). A 4x4
// output tile of an r x r convolution is A^T [(G g G^T) . (B^T d B)] A for its a x a input patch
// d, a = r + 3: 36 products per channel pair where the direct 3x3 convolution needs 144
// (winograd_f4x3_1d.hpp: points 0, +-1, +-2, infinity), 64 where the 5x5 one needs 400
// (winograd_f4x5_1d.hpp: also +-1/2). Summed over input channels, the a^2 elementwise products
// become a^2 matrix products (winograd_conv.cpp), so the arithmetic falls 4x (6.25x) and goes to
// oneDNN's GEMM; these loops only move data in and out of the transform domain.
//
// The transformed buffers are [a^2][rows][channels]: transform point xi = a * i + j, then the
// tiles of a chunk (tile t at row t - first), then channels, contiguous. Their channel counts
// (here and below, in_c and out_c in the filters) are padded to a multiple of 16 with zeros, so
// the transforms move whole lane blocks and the matrix products sum nothing from the padding;
// the activations and plain weights hold only real channels.
//
// A dilated convolution (dilation d) is d x d dense ones, each on the pixels of one phase (rows
// p, p + d, p + 2d, ...; likewise columns): output row p + d k reads input rows p - pad + d (k +
// i). So a tile lies in one phase and steps d pixels: tile t = (((n * d_h + p_y) * d_w + p_x) *
// tiles_h + ty) * tiles_w + tx covers output rows p_y + d_h (4 ty + i), i < 4 (columns alike),
// and its patch the input rows p_y - pad_top + d_h (4 ty + i), i < a, reading zeros outside the
// input. tiles_h and tiles_w cover the largest phase; output pixels of tiles beyond the output
// are dropped. Without dilation (d = 1) there is one phase and tiles are plain 4x4 blocks.
//
// The weight gradient uses the same bilinear form read the other way (the transposition
// principle): for a 1-D tile, sum_i dy_i y_i = sum_xi (A dy)_xi (G g)_xi (B^T d)_xi, so the
// gradient of g is G^T [(A dy) . (B^T d)], and in 2-D G^T [(A dY A^T) . (B^T D B)] G.
#pragma once
#include <cstdint>

#include "onednn/lane_addressing.hpp"
#include "onednn/winograd_f4x3_1d.hpp"
#include "onednn/winograd_f4x5_1d.hpp"

namespace crest::onednn::winograd {

constexpr int64_t kTile = 4;  // output pixels per tile side, both tilings

// The filter sizes the tilings take, and their transform points: 36 for 3x3, 64 for 5x5.
inline bool tiling_takes(int64_t taps) { return taps == 3 || taps == 5; }
constexpr int64_t points(int64_t taps) { return (taps + kTile - 1) * (taps + kTile - 1); }

// Tiles along an axis of `size` output pixels at dilation d: enough for the largest phase, whose
// ceil(size / d) pixels lie d apart.
inline int64_t tiles_along(int64_t size, int64_t dilation) {
  return ((size + dilation - 1) / dilation + kTile - 1) / kTile;
}

// One convolution's tiling: taps x taps (3 or 5), stride 1, from `in` to `out` (both in lane
// blocks).
struct Grid {
  int64_t taps = 3;
  int64_t samples = 0, tiles_h = 0, tiles_w = 0;  // tiles per phase
  int64_t pad_top = 0, pad_left = 0;
  int64_t dilation_h = 1, dilation_w = 1;  // 1: dense
  Addressing in, out;
  int64_t in_channels = 0, out_channels = 0;  // any: the buffers below pad them to 16

  int64_t tiles() const { return samples * dilation_h * dilation_w * tiles_h * tiles_w; }
};

// The grid of a taps x taps convolution from `in` to `out`: tiles_h and tiles_w for the largest
// phase.
Grid grid(int64_t taps, int64_t samples, const Addressing& in, const Addressing& out,
          int64_t in_channels, int64_t out_channels, int64_t pad_top, int64_t pad_left,
          int64_t dilation_h, int64_t dilation_w);

// Activations are float32 or bf16 (uint16_t codes, read and written as lanes.hpp rounds); the
// transformed tiles are float32 either way.

// The tiles [first, last) of `in`: B^T d B into v, [points][last - first][in_channels].
void input_tiles(const Grid& g, const float* in, int64_t first, int64_t last, float* v);
void input_tiles(const Grid& g, const uint16_t* in, int64_t first, int64_t last, float* v);

// The tiles [first, last) of the output from m, [points][last - first][out_channels]: A^T m A, plus
// `bias` ([out_channels]) when not null, through `act`, written over the output pixels the tiles
// cover.
void output_tiles(const Grid& g, const float* m, const float* bias, const OutputActivation& act,
                  int64_t first, int64_t last, float* out);
void output_tiles(const Grid& g, const float* m, const float* bias, const OutputActivation& act,
                  int64_t first, int64_t last, uint16_t* out);

// The tiles [first, last) of the output's gradient `diff_out` (laid out as g.out): A dY A^T into
// tiles, [points][last - first][out_channels]; pixels beyond the output count as zero.
void gradient_tiles(const Grid& g, const float* diff_out, int64_t first, int64_t last,
                    float* tiles);
void gradient_tiles(const Grid& g, const uint16_t* diff_out, int64_t first, int64_t last,
                    float* tiles);

// G w G^T of crest's plain weights w [out_c][in_c][taps][taps]. `for_data_gradient` false: into
// u as [points][in_c][out_c] (the forward's matrix products map in_c to out_c). True: of each
// filter turned by 180 degrees, as [points][out_c][in_c]: the input gradient of a stride-1
// convolution is the convolution of the output gradient with those filters, mapping out_c to
// in_c, with padding (taps - 1) d - pad.
void filters(int64_t taps, const float* w, int64_t out_c, int64_t in_c, bool for_data_gradient,
             float* u);

// G^T z G of z [points][out_c][in_c] into crest's plain weight gradient dw
// [out_c][in_c][taps][taps].
void filter_gradient(int64_t taps, const float* z, int64_t out_c, int64_t in_c, float* dw);

}  // namespace crest::onednn::winograd
