#include "onednn/winograd_f4x3.hpp"

#include "widest_vectors.hpp"

namespace crest::onednn::winograd {

namespace {

using lanes::kLanes;
using lanes::Lanes;
using lanes::load;
using lanes::store;

// The 1-D transforms, each a fixed matrix applied to 16 channels at once. Multiplications by the
// constants (not divisions) keep the filter transform cheap; its rounding differs from exact
// thirds by an ulp, far inside the algorithm's own error.
using Transform1d = void (*)(const Lanes*, Lanes*);

// B^T d: a 6-pixel patch to the 6 points.
[[gnu::always_inline]] inline void input_1d(const Lanes* d, Lanes* r) {
  r[0] = 4.f * d[0] - 5.f * d[2] + d[4];
  r[1] = d[3] + d[4] - 4.f * (d[1] + d[2]);
  r[2] = 4.f * (d[1] - d[2]) - d[3] + d[4];
  r[3] = 2.f * (d[3] - d[1]) - d[2] + d[4];
  r[4] = 2.f * (d[1] - d[3]) - d[2] + d[4];
  r[5] = 4.f * d[1] - 5.f * d[3] + d[5];
}

// A^T m: the 6 points to 4 output pixels.
[[gnu::always_inline]] inline void output_1d(const Lanes* m, Lanes* o) {
  const Lanes sum12 = m[1] + m[2], diff12 = m[1] - m[2];
  const Lanes sum34 = m[3] + m[4], diff34 = m[3] - m[4];
  o[0] = m[0] + sum12 + sum34;
  o[1] = diff12 + 2.f * diff34;
  o[2] = sum12 + 4.f * sum34;
  o[3] = diff12 + 8.f * diff34 + m[5];
}

// A dy: 4 output-gradient pixels to the 6 points (the transpose of output_1d).
[[gnu::always_inline]] inline void gradient_1d(const Lanes* dy, Lanes* r) {
  const Lanes even = dy[0] + dy[2], odd = dy[1] + dy[3];
  const Lanes even4 = dy[0] + 4.f * dy[2], odd8 = 2.f * dy[1] + 8.f * dy[3];
  r[0] = dy[0];
  r[1] = even + odd;
  r[2] = even - odd;
  r[3] = even4 + odd8;
  r[4] = even4 - odd8;
  r[5] = dy[3];
}

constexpr float kQuarter = 1.f / 4, kSixth = 1.f / 6, kTwelfth = 1.f / 12, k24th = 1.f / 24;

// G g: 3 filter taps to the 6 points.
[[gnu::always_inline]] inline void filter_1d(const Lanes* g, Lanes* u) {
  const Lanes outer = g[0] + g[2];
  u[0] = kQuarter * g[0];
  u[1] = -kSixth * (outer + g[1]);
  u[2] = -kSixth * (outer - g[1]);
  const Lanes mixed = k24th * g[0] + kSixth * g[2];
  u[3] = mixed + kTwelfth * g[1];
  u[4] = mixed - kTwelfth * g[1];
  u[5] = g[2];
}

// G^T z: the 6 points to 3 filter-tap gradients (the transpose of filter_1d).
[[gnu::always_inline]] inline void filter_gradient_1d(const Lanes* z, Lanes* dg) {
  const Lanes sum12 = z[1] + z[2], sum34 = z[3] + z[4];
  dg[0] = kQuarter * z[0] - kSixth * sum12 + k24th * sum34;
  dg[1] = kSixth * (z[2] - z[1]) + kTwelfth * (z[3] - z[4]);
  dg[2] = kSixth * (sum34 - sum12) + z[5];
}

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

// Where point xi of tile row r, lane block b lies in a [36][rows][channels] buffer.
inline int64_t point_at(int64_t xi, int64_t rows, int64_t r, int64_t channels, int64_t b) {
  return (xi * rows + r) * channels + b * kLanes;
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
  Lanes d[6][6], r[6][6];
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 6; ++j) {
      const int64_t y = o.y - g.pad_top + i * g.dilation_h;
      const int64_t x = o.x - g.pad_left + j * g.dilation_w;
      d[i][j] = inside(g.in, y, x) ? load(in + g.in.at(o.n, b, y, x)) : Lanes{};
    }
  both_axes<6, 6, input_1d>(d, r);
  for (int64_t xi = 0; xi < kPoints; ++xi)
    store(v + point_at(xi, rows, t - first, g.in_channels, b), r[xi / 6][xi % 6]);
}

template <typename T>
[[gnu::always_inline]] inline void output_tile(const Grid& g, const float* m, const float* bias,
                                               int64_t t, int64_t b, int64_t first, int64_t rows,
                                               T* out) {
  const TileOrigin o = origin(g, t);
  Lanes p[6][6], y[4][4];
  for (int64_t xi = 0; xi < kPoints; ++xi)
    p[xi / 6][xi % 6] = load(m + point_at(xi, rows, t - first, g.out_channels, b));
  both_axes<6, 4, output_1d>(p, y);
  const Lanes shift = bias != nullptr ? load(bias + b * kLanes) : Lanes{};
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      const int64_t py = o.y + i * g.dilation_h, px = o.x + j * g.dilation_w;
      if (inside(g.out, py, px)) store(out + g.out.at(o.n, b, py, px), y[i][j] + shift);
    }
}

template <typename T>
[[gnu::always_inline]] inline void gradient_tile(const Grid& g, const T* diff_out, int64_t t,
                                                 int64_t b, int64_t first, int64_t rows,
                                                 float* tiles) {
  const TileOrigin o = origin(g, t);
  Lanes dy[4][4], r[6][6];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      const int64_t py = o.y + i * g.dilation_h, px = o.x + j * g.dilation_w;
      dy[i][j] = inside(g.out, py, px) ? load(diff_out + g.out.at(o.n, b, py, px)) : Lanes{};
    }
  both_axes<4, 6, gradient_1d>(dy, r);
  for (int64_t xi = 0; xi < kPoints; ++xi)
    store(tiles + point_at(xi, rows, t - first, g.out_channels, b), r[xi / 6][xi % 6]);
}

}  // namespace

// The loops, one per activation type, compiled per instruction-set level (widest_vectors.hpp);
// the parallel loops sit in those functions, whose OpenMP bodies inherit their target.
#define CREST_OVER_TILES(channels, call)                                                     \
  const int64_t rows = last - first, blocks = (channels) / kLanes;                           \
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

void output_tiles(const Grid& g, const float* m, const float* bias, int64_t first, int64_t last,
                  float* out) {
  CREST_WIDEST_VECTORS_CALL(output_tiles, g, m, bias, first, last, out);
}

void output_tiles(const Grid& g, const float* m, const float* bias, int64_t first, int64_t last,
                  uint16_t* out) {
  CREST_WIDEST_VECTORS_CALL(output_tiles, g, m, bias, first, last, out);
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
