#include "onednn/winograd_f4x3.hpp"

#include "onednn/winograd_f4x3_1d.hpp"
#include "widest_vectors.hpp"

namespace crest::onednn::winograd {

namespace {

using lanes::kLanes;
using lanes::Lanes;
using lanes::lanes_in_block;
using lanes::load;
using lanes::load_first;
using lanes::padded_to_lanes;
using lanes::store;
using lanes::store_first;

// y = F x F^T for the 1-D transform F (I values to O): down the columns, then along the rows.
template <int I, int O, Transform1d F>
[[gnu::always_inline]] inline void both_axes(const Lanes (&x)[I][I], Lanes (&y)[O][O]) {
  Lanes columns[O][I];
  for (int j = 0; j < I; ++j) {
    Lanes in[I], out[O];
    for (int i = 0; i < I; ++i) in[i] = x[i][j];
    F(in, out);
    for (int o = 0; o < O; ++o) columns[o][j] = out[o];
  }
  for (int o = 0; o < O; ++o) F(columns[o], y[o]);
}

// Sample and first output pixel of tile t; its pixels step by the dilation from there.
struct TileOrigin {
  int64_t n, y, x;
};
inline TileOrigin origin(const Grid& g, int64_t t) {
  const int64_t tx = t % g.tiles_w, ty = t / g.tiles_w % g.tiles_h;
  const int64_t phase = t / (g.tiles_w * g.tiles_h);
  const int64_t px = phase % g.dilation_w, py = phase / g.dilation_w % g.dilation_h;
  const int64_t n = phase / (g.dilation_w * g.dilation_h);
  return {n, py + g.dilation_h * kTile * ty, px + g.dilation_w * kTile * tx};
}

inline bool inside(const Addressing& a, int64_t y, int64_t x) {
  return y >= 0 && y < a.height && x >= 0 && x < a.width;
}

// Where point xi of tile row r, lane block b lies in a [36][rows][channels padded to 16] buffer.
inline int64_t point_at(int64_t xi, int64_t rows, int64_t r, int64_t channels, int64_t b) {
  return (xi * rows + r) * padded_to_lanes(channels) + b * kLanes;
}

}  // namespace

Grid grid(int64_t samples, const Addressing& in, const Addressing& out, int64_t in_channels,
          int64_t out_channels, int64_t pad_top, int64_t pad_left, int64_t dilation_h,
          int64_t dilation_w) {
  Grid g;
  g.samples = samples;
  g.tiles_h = tiles_along(out.height, dilation_h);
  g.tiles_w = tiles_along(out.width, dilation_w);
  g.pad_top = pad_top;
  g.pad_left = pad_left;
  g.dilation_h = dilation_h;
  g.dilation_w = dilation_w;
  g.in = in;
  g.out = out;
  g.in_channels = in_channels;
  g.out_channels = out_channels;
  return g;
}

namespace {

// The per-tile bodies, for float32 or bf16 activations (T = float or uint16_t bf16 codes; the
// transformed tiles are float32 either way). Lane block b of tile t.
template <typename T>
[[gnu::always_inline]] inline void input_tile(const Grid& g, const T* in, int64_t t, int64_t b,
                                              int64_t first, int64_t rows, float* v) {
  const TileOrigin o = origin(g, t);
  const int64_t count = lanes_in_block(g.in_channels, b);
  Lanes d[6][6], r[6][6];
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 6; ++j) {
      const int64_t y = o.y - g.pad_top + i * g.dilation_h;
      const int64_t x = o.x - g.pad_left + j * g.dilation_w;
      d[i][j] = inside(g.in, y, x) ? load_first(in + g.in.at(o.n, b, y, x), count) : Lanes{};
    }
  both_axes<6, 6, input_1d>(d, r);
  for (int64_t xi = 0; xi < kPoints; ++xi)
    store(v + point_at(xi, rows, t - first, g.in_channels, b), r[xi / 6][xi % 6]);
}

template <typename T>
[[gnu::always_inline]] inline void output_tile(const Grid& g, const float* m, const float* bias,
                                               const OutputActivation& act, int64_t t, int64_t b,
                                               int64_t first, int64_t rows, T* out) {
  const TileOrigin o = origin(g, t);
  Lanes p[6][6], y[4][4];
  for (int64_t xi = 0; xi < kPoints; ++xi)
    p[xi / 6][xi % 6] = load(m + point_at(xi, rows, t - first, g.out_channels, b));
  both_axes<6, 4, output_1d>(p, y);
  const int64_t count = lanes_in_block(g.out_channels, b);
  const Lanes shift = bias != nullptr ? load_first(bias + b * kLanes, count) : Lanes{};
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      const int64_t py = o.y + i * g.dilation_h, px = o.x + j * g.dilation_w;
      if (inside(g.out, py, px))
        store_first(out + g.out.at(o.n, b, py, px), activated(y[i][j] + shift, act), count);
    }
}

template <typename T>
[[gnu::always_inline]] inline void gradient_tile(const Grid& g, const T* diff_out, int64_t t,
                                                 int64_t b, int64_t first, int64_t rows,
                                                 float* tiles) {
  const TileOrigin o = origin(g, t);
  const int64_t count = lanes_in_block(g.out_channels, b);
  Lanes dy[4][4], r[6][6];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      const int64_t py = o.y + i * g.dilation_h, px = o.x + j * g.dilation_w;
      dy[i][j] =
          inside(g.out, py, px) ? load_first(diff_out + g.out.at(o.n, b, py, px), count) : Lanes{};
    }
  both_axes<4, 6, gradient_1d>(dy, r);
  for (int64_t xi = 0; xi < kPoints; ++xi)
    store(tiles + point_at(xi, rows, t - first, g.out_channels, b), r[xi / 6][xi % 6]);
}

}  // namespace

// The loops, one per activation type, compiled per instruction-set level (widest_vectors.hpp);
// the parallel loops sit in those functions, whose OpenMP bodies inherit their target.
#define CREST_OVER_TILES(channels, call)                                                     \
  const int64_t rows = last - first, blocks = padded_to_lanes(channels) / kLanes;            \
  _Pragma("omp parallel for collapse(2) schedule(static)") for (int64_t t = first; t < last; \
                                                                ++t) for (int64_t b = 0;     \
                                                                          b < blocks; ++b) call

namespace {
#define CREST_WIDEST_VECTORS_LOOPS "onednn/winograd_f4x3.inc"
#include "widest_vectors_expand.hpp"
}  // namespace

void input_tiles(const Grid& g, const float* in, int64_t first, int64_t last, float* v) {
  CREST_WIDEST_VECTORS_CALL(input_tiles, g, in, first, last, v);
}

void input_tiles(const Grid& g, const uint16_t* in, int64_t first, int64_t last, float* v) {
  CREST_WIDEST_VECTORS_CALL(input_tiles, g, in, first, last, v);
}

void output_tiles(const Grid& g, const float* m, const float* bias, const OutputActivation& act,
                  int64_t first, int64_t last, float* out) {
  CREST_WIDEST_VECTORS_CALL(output_tiles, g, m, bias, act, first, last, out);
}

void output_tiles(const Grid& g, const float* m, const float* bias, const OutputActivation& act,
                  int64_t first, int64_t last, uint16_t* out) {
  CREST_WIDEST_VECTORS_CALL(output_tiles, g, m, bias, act, first, last, out);
}

void gradient_tiles(const Grid& g, const float* diff_out, int64_t first, int64_t last,
                    float* tiles) {
  CREST_WIDEST_VECTORS_CALL(gradient_tiles, g, diff_out, first, last, tiles);
}

void gradient_tiles(const Grid& g, const uint16_t* diff_out, int64_t first, int64_t last,
                    float* tiles) {
  CREST_WIDEST_VECTORS_CALL(gradient_tiles, g, diff_out, first, last, tiles);
}

void filters(const float* w, int64_t out_c, int64_t in_c, bool for_data_gradient, float* u) {
  CREST_WIDEST_VECTORS_CALL(filters, w, out_c, in_c, for_data_gradient, u);
}

void filter_gradient(const float* z, int64_t out_c, int64_t in_c, float* dw) {
  CREST_WIDEST_VECTORS_CALL(filter_gradient, z, out_c, in_c, dw);
}

#undef CREST_OVER_TILES

}  // namespace crest::onednn::winograd
