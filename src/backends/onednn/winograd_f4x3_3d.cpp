#include "onednn/winograd_f4x3_3d.hpp"

#include "onednn/winograd_f4x3_1d.hpp"
#include "widest_vectors.hpp"

namespace crest::onednn::winograd3d {

namespace {

using lanes::kLanes;
using lanes::Lanes;
using lanes::lanes_in_block;
using lanes::load;
using lanes::load_first;
using lanes::padded_to_lanes;
using lanes::store;
using lanes::store_first;
using winograd::OutputActivation;
using winograd::Transform1d;

// The 1-D transform F (I values to O) along the last, the middle, then the first axis of x,
// handing each result y[a][b][c] to `put(flat index (a O + b) O + c, value)` as it is made, so
// the last of the three cubes never exists. x arrives along its last axis already: `row(i, j,
// r)` fills r[0..I) with x[i][j][*].
template <int I, int O, Transform1d F, typename Row, typename Put>
[[gnu::always_inline]] inline void three_axes(Row&& row, Put&& put) {
  Lanes last[I][I][O];
  for (int i = 0; i < I; ++i)
    for (int j = 0; j < I; ++j) {
      Lanes r[I];
      row(i, j, r);
      F(r, last[i][j]);
    }
  Lanes middle[I][O][O];
  for (int i = 0; i < I; ++i)
    for (int c = 0; c < O; ++c) {
      Lanes in[I], out[O];
      for (int j = 0; j < I; ++j) in[j] = last[i][j][c];
      F(in, out);
      for (int b = 0; b < O; ++b) middle[i][b][c] = out[b];
    }
  for (int b = 0; b < O; ++b)
    for (int c = 0; c < O; ++c) {
      Lanes in[I], out[O];
      for (int i = 0; i < I; ++i) in[i] = middle[i][b][c];
      F(in, out);
      for (int a = 0; a < O; ++a) put((a * O + b) * O + c, out[a]);
    }
}

// Sample and first output voxel (depth, row, column) of tile t.
struct TileOrigin {
  int64_t n, z, y, x;
};
inline TileOrigin origin(const Grid& g, int64_t t) {
  const int64_t tx = t % g.tiles[2], ty = t / g.tiles[2] % g.tiles[1];
  const int64_t tz = t / (g.tiles[2] * g.tiles[1]) % g.tiles[0];
  const int64_t n = t / (g.tiles[2] * g.tiles[1] * g.tiles[0]);
  return {n, kTile * tz, kTile * ty, kTile * tx};
}

inline bool inside(const Extent& e, int64_t z, int64_t y, int64_t x) {
  return z >= 0 && z < e[0] && y >= 0 && y < e[1] && x >= 0 && x < e[2];
}

// Where voxel (z, y, x) of sample n's lane block b lies: the depth folded into the rows.
inline int64_t voxel_at(const Addressing& a, const Extent& e, int64_t n, int64_t b, int64_t z,
                        int64_t y, int64_t x) {
  return a.at(n, b, z * e[1] + y, x);
}

// Where point xi of tile row r, lane block b lies in a [216][rows][channels padded to 16]
// buffer.
inline int64_t point_at(int64_t xi, int64_t rows, int64_t r, int64_t channels, int64_t b) {
  return (xi * rows + r) * padded_to_lanes(channels) + b * kLanes;
}

// The per-tile bodies, for float32 or bf16 activations (T = float or uint16_t bf16 codes). Lane
// block b of tile t.
template <typename T>
[[gnu::always_inline]] inline void input_tile(const Grid& g, const T* in, int64_t t, int64_t b,
                                              int64_t first, int64_t rows, float* v) {
  const TileOrigin o = origin(g, t);
  const int64_t count = lanes_in_block(g.in_channels, b);
  auto row = [&](int i, int j, Lanes* r) CREST_INLINED_LAMBDA {
    const int64_t z = o.z - g.pad[0] + i, y = o.y - g.pad[1] + j;
    for (int k = 0; k < 6; ++k) {
      const int64_t x = o.x - g.pad[2] + k;
      r[k] = inside(g.in_size, z, y, x)
                 ? load_first(in + voxel_at(g.in, g.in_size, o.n, b, z, y, x), count)
                 : Lanes{};
    }
  };
  auto put = [&](int xi, Lanes value) CREST_INLINED_LAMBDA {
    store(v + point_at(xi, rows, t - first, g.in_channels, b), value);
  };
  three_axes<6, 6, winograd::input_1d>(row, put);
}

template <typename T>
[[gnu::always_inline]] inline void output_tile(const Grid& g, const float* m, const float* bias,
                                               const OutputActivation& act, int64_t t, int64_t b,
                                               int64_t first, int64_t rows, T* out) {
  const TileOrigin o = origin(g, t);
  auto row = [&](int i, int j, Lanes* r) CREST_INLINED_LAMBDA {
    for (int k = 0; k < 6; ++k)
      r[k] = load(m + point_at((i * 6 + j) * 6 + k, rows, t - first, g.out_channels, b));
  };
  const int64_t count = lanes_in_block(g.out_channels, b);
  const Lanes shift = bias != nullptr ? load_first(bias + b * kLanes, count) : Lanes{};
  auto put = [&](int at, Lanes value) CREST_INLINED_LAMBDA {
    const int64_t z = o.z + at / 16, y = o.y + at / 4 % 4, x = o.x + at % 4;
    if (inside(g.out_size, z, y, x))
      store_first(out + voxel_at(g.out, g.out_size, o.n, b, z, y, x), activated(value + shift, act),
                  count);
  };
  three_axes<6, 4, winograd::output_1d>(row, put);
}

template <typename T>
[[gnu::always_inline]] inline void gradient_tile(const Grid& g, const T* diff_out, int64_t t,
                                                 int64_t b, int64_t first, int64_t rows,
                                                 float* tiles) {
  const TileOrigin o = origin(g, t);
  const int64_t count = lanes_in_block(g.out_channels, b);
  auto row = [&](int i, int j, Lanes* r) CREST_INLINED_LAMBDA {
    const int64_t z = o.z + i, y = o.y + j;
    for (int k = 0; k < 4; ++k) {
      const int64_t x = o.x + k;
      r[k] = inside(g.out_size, z, y, x)
                 ? load_first(diff_out + voxel_at(g.out, g.out_size, o.n, b, z, y, x), count)
                 : Lanes{};
    }
  };
  auto put = [&](int xi, Lanes value) CREST_INLINED_LAMBDA {
    store(tiles + point_at(xi, rows, t - first, g.out_channels, b), value);
  };
  three_axes<4, 6, winograd::gradient_1d>(row, put);
}

}  // namespace

Grid grid(int64_t samples, const Addressing& in, const Extent& in_size, const Addressing& out,
          const Extent& out_size, int64_t in_channels, int64_t out_channels, const Extent& pad) {
  Grid g;
  g.samples = samples;
  for (size_t a = 0; a < 3; ++a) g.tiles[a] = tiles_along(out_size[a]);
  g.pad = pad;
  g.in_size = in_size;
  g.out_size = out_size;
  g.in = in;
  g.out = out;
  g.in_channels = in_channels;
  g.out_channels = out_channels;
  return g;
}

// The loops, one per activation type, compiled per instruction-set level (widest_vectors.hpp);
// the parallel loops sit in those functions, whose OpenMP bodies inherit their target.
#define CREST_OVER_TILES(channels, call)                                                     \
  const int64_t rows = last - first, blocks = padded_to_lanes(channels) / kLanes;            \
  _Pragma("omp parallel for collapse(2) schedule(static)") for (int64_t t = first; t < last; \
                                                                ++t) for (int64_t b = 0;     \
                                                                          b < blocks; ++b) call

namespace {
#define CREST_WIDEST_VECTORS_LOOPS "onednn/winograd_f4x3_3d.inc"
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

}  // namespace crest::onednn::winograd3d
