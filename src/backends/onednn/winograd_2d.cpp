#include "onednn/winograd_2d.hpp"

#include "onednn/winograd_f4x3_1d.hpp"
#include "onednn/winograd_f4x5_1d.hpp"
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

// Where point xi of tile row r, lane block b lies in a [points][rows][channels padded to 16]
// buffer.
inline int64_t point_at(int64_t xi, int64_t rows, int64_t r, int64_t channels, int64_t b) {
  return (xi * rows + r) * padded_to_lanes(channels) + b * kLanes;
}

}  // namespace

Grid grid(int64_t taps, int64_t samples, const Addressing& in, const Addressing& out,
          int64_t in_channels, int64_t out_channels, int64_t pad_top, int64_t pad_left,
          int64_t dilation_h, int64_t dilation_w) {
  Grid g;
  g.taps = taps;
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

// The per-tile bodies, for the tiling Algo (F4x3 or F4x5, a = Algo::kPoints points per axis) and
// float32 or bf16 activations (T = float or uint16_t bf16 codes; the transformed tiles are
// float32 either way). Lane block b of tile t.
template <typename Algo, typename T>
[[gnu::always_inline]] inline void input_tile(const Grid& g, const T* in, int64_t t, int64_t b,
                                              int64_t first, int64_t rows, float* v) {
  constexpr int a = Algo::kPoints;
  const TileOrigin o = origin(g, t);
  const int64_t count = lanes_in_block(g.in_channels, b);
  Lanes d[a][a], r[a][a];
  for (int i = 0; i < a; ++i)
    for (int j = 0; j < a; ++j) {
      const int64_t y = o.y - g.pad_top + i * g.dilation_h;
      const int64_t x = o.x - g.pad_left + j * g.dilation_w;
      d[i][j] = inside(g.in, y, x) ? load_first(in + g.in.at(o.n, b, y, x), count) : Lanes{};
    }
  both_axes<a, a, Algo::input>(d, r);
  for (int64_t xi = 0; xi < int64_t{a} * a; ++xi)
    store(v + point_at(xi, rows, t - first, g.in_channels, b), r[xi / a][xi % a]);
}

template <typename Algo, typename T>
[[gnu::always_inline]] inline void output_tile(const Grid& g, const float* m, const float* bias,
                                               const OutputActivation& act, int64_t t, int64_t b,
                                               int64_t first, int64_t rows, T* out) {
  constexpr int a = Algo::kPoints;
  const TileOrigin o = origin(g, t);
  Lanes p[a][a], y[kTile][kTile];
  for (int64_t xi = 0; xi < int64_t{a} * a; ++xi)
    p[xi / a][xi % a] = load(m + point_at(xi, rows, t - first, g.out_channels, b));
  both_axes<a, kTile, Algo::output>(p, y);
  const int64_t count = lanes_in_block(g.out_channels, b);
  const Lanes shift = bias != nullptr ? load_first(bias + b * kLanes, count) : Lanes{};
  for (int i = 0; i < kTile; ++i)
    for (int j = 0; j < kTile; ++j) {
      const int64_t py = o.y + i * g.dilation_h, px = o.x + j * g.dilation_w;
      if (inside(g.out, py, px))
        store_first(out + g.out.at(o.n, b, py, px), activated(y[i][j] + shift, act), count);
    }
}

template <typename Algo, typename T>
[[gnu::always_inline]] inline void gradient_tile(const Grid& g, const T* diff_out, int64_t t,
                                                 int64_t b, int64_t first, int64_t rows,
                                                 float* tiles) {
  constexpr int a = Algo::kPoints;
  const TileOrigin o = origin(g, t);
  const int64_t count = lanes_in_block(g.out_channels, b);
  Lanes dy[kTile][kTile], r[a][a];
  for (int i = 0; i < kTile; ++i)
    for (int j = 0; j < kTile; ++j) {
      const int64_t py = o.y + i * g.dilation_h, px = o.x + j * g.dilation_w;
      dy[i][j] =
          inside(g.out, py, px) ? load_first(diff_out + g.out.at(o.n, b, py, px), count) : Lanes{};
    }
  both_axes<kTile, a, Algo::gradient>(dy, r);
  for (int64_t xi = 0; xi < int64_t{a} * a; ++xi)
    store(tiles + point_at(xi, rows, t - first, g.out_channels, b), r[xi / a][xi % a]);
}

// Filter a's lane block b of the transformed filters u [points][outer][inner] (see filters()).
template <typename Algo>
[[gnu::always_inline]] inline void filter_block(const float* w, int64_t out_c, int64_t in_c,
                                                bool for_data_gradient, int64_t a, int64_t b,
                                                float* u) {
  constexpr int k = Algo::kTaps, p = Algo::kPoints;
  // Lanes run along the buffer's contiguous channels: out_c forward, in_c for the data gradient.
  // Both sides are padded to 16 with zero filters, so padded lanes add nothing to the sums.
  const int64_t outer = for_data_gradient ? out_c : in_c;
  const int64_t inner = for_data_gradient ? in_c : out_c;
  const int64_t outer_padded = padded_to_lanes(outer), inner_padded = padded_to_lanes(inner);
  const int64_t count = a < outer ? lanes_in_block(inner, b) : 0;
  Lanes g[k][k] = {}, r[p][p];
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < k; ++j)
      for (int64_t l = 0; l < count; ++l) {
        const int64_t lane = b * kLanes + l;
        g[i][j][l] = for_data_gradient ? w[((a * in_c + lane) * k + (k - 1 - i)) * k + (k - 1 - j)]
                                       : w[((lane * in_c + a) * k + i) * k + j];
      }
  both_axes<k, p, Algo::filter>(g, r);
  for (int64_t xi = 0; xi < int64_t{p} * p; ++xi)
    store(u + (xi * outer_padded + a) * inner_padded + b * kLanes, r[xi / p][xi % p]);
}

// Output channel o's lane block b of the weight gradient from z [points][out_c][in_c].
template <typename Algo>
[[gnu::always_inline]] inline void filter_gradient_block(const float* z, int64_t out_c,
                                                         int64_t in_c, int64_t o, int64_t b,
                                                         float* dw) {
  constexpr int k = Algo::kTaps, p = Algo::kPoints;
  const int64_t out_padded = padded_to_lanes(out_c), in_padded = padded_to_lanes(in_c);
  Lanes points[p][p], r[k][k];
  for (int64_t xi = 0; xi < int64_t{p} * p; ++xi)
    points[xi / p][xi % p] = load(z + (xi * out_padded + o) * in_padded + b * kLanes);
  both_axes<p, k, Algo::filter_gradient>(points, r);
  for (int64_t l = 0; l < lanes_in_block(in_c, b); ++l)
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < k; ++j)
        dw[((o * in_c + b * kLanes + l) * k + i) * k + j] = r[i][j][l];
}

}  // namespace

// The loops, one per activation type, compiled per instruction-set level (widest_vectors.hpp);
// the parallel loops sit in those functions, whose OpenMP bodies inherit their target.
#define CREST_OVER_TILES(channels, call)                                                     \
  const int64_t rows = last - first, blocks = padded_to_lanes(channels) / kLanes;            \
  _Pragma("omp parallel for collapse(2) schedule(static)") for (int64_t t = first; t < last; \
                                                                ++t) for (int64_t b = 0;     \
                                                                          b < blocks; ++b) call
// `call` for the tiling of a taps x taps filter, Algo naming it. The branch sits inside the
// loop (per tile and lane block, always taken alike), so the OpenMP region stays in the loop
// function itself (widest_vectors.hpp) and each tiling's transforms are inlined into it.
#define CREST_BY_TAPS(taps, call) \
  if ((taps) == 5) {              \
    using Algo = F4x5;            \
    call;                         \
  } else {                        \
    using Algo = F4x3;            \
    call;                         \
  }

namespace {
#define CREST_WIDEST_VECTORS_LOOPS "onednn/winograd_2d.inc"
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

void filters(int64_t taps, const float* w, int64_t out_c, int64_t in_c, bool for_data_gradient,
             float* u) {
  CREST_WIDEST_VECTORS_CALL(filters, taps, w, out_c, in_c, for_data_gradient, u);
}

void filter_gradient(int64_t taps, const float* z, int64_t out_c, int64_t in_c, float* dw) {
  CREST_WIDEST_VECTORS_CALL(filter_gradient, taps, z, out_c, in_c, dw);
}

#undef CREST_BY_TAPS
#undef CREST_OVER_TILES

}  // namespace crest::onednn::winograd
