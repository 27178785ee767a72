// The 1-D transforms of Winograd's F(4, 5) with the points 0, +-1, +-2, +-1/2 and infinity: 4
// outputs of a 5-tap filter from an 8-pixel patch, 8 products where the direct sum needs 20. The
// 2-D tiling (winograd_2d.hpp) applies them along both axes of a tile, F(4x4, 5x5): 64 products
// for 400, the Tiramisu's 5x5 convolutions. The matrices follow the Toom-Cook construction
// (Lavin & Gray, 2016; Barabasz et al., 2020): A^T holds the points' powers, G their powers over
// prod_{l != j}(p_j - p_l), B^T the coefficients of prod_{l != j}(x - p_l); B^T is the one of
// F(6, 3) on the same points (NNPACK's, with its 21/4 and 17/4), whose float32 error is
// well studied. Always inlined, so each instruction-set copy of a loop gets its own.
#pragma once
#include "onednn/lanes.hpp"
#include "onednn/winograd_f4x3_1d.hpp"

namespace crest::onednn::winograd {

// B^T d: an 8-pixel patch to the 8 points, each pair of opposite points from one even and one
// odd part.
[[gnu::always_inline]] inline void input_f4x5(const Lanes* d, Lanes* r) {
  r[0] = 5.25f * (d[2] - d[4]) + d[6] - d[0];
  const Lanes even1 = d[2] + d[6] - 4.25f * d[4], odd1 = d[1] + d[5] - 4.25f * d[3];
  r[1] = even1 + odd1;
  r[2] = even1 - odd1;
  const Lanes even_half = 0.25f * d[2] - 1.25f * d[4] + d[6];
  const Lanes odd_half = 0.5f * d[1] - 2.5f * d[3] + 2.f * d[5];
  r[3] = even_half + odd_half;
  r[4] = even_half - odd_half;
  const Lanes even2 = 4.f * d[2] - 5.f * d[4] + d[6];
  const Lanes odd2 = 2.f * d[1] - 2.5f * d[3] + 0.5f * d[5];
  r[5] = even2 + odd2;
  r[6] = even2 - odd2;
  r[7] = 5.25f * (d[3] - d[5]) + d[7] - d[1];
}

// A^T m: the 8 points (0, 1, -1, 2, -2, 1/2, -1/2, infinity) to 4 output pixels.
[[gnu::always_inline]] inline void output_f4x5(const Lanes* m, Lanes* o) {
  const Lanes sum1 = m[1] + m[2], diff1 = m[1] - m[2];
  const Lanes sum2 = m[3] + m[4], diff2 = m[3] - m[4];
  const Lanes sum_half = m[5] + m[6], diff_half = m[5] - m[6];
  o[0] = m[0] + sum1 + sum2 + sum_half;
  o[1] = diff1 + 2.f * diff2 + 0.5f * diff_half;
  o[2] = sum1 + 4.f * sum2 + 0.25f * sum_half;
  o[3] = diff1 + 8.f * diff2 + 0.125f * diff_half + m[7];
}

// A dy: 4 output-gradient pixels to the 8 points (the transpose of output_f4x5).
[[gnu::always_inline]] inline void gradient_f4x5(const Lanes* dy, Lanes* r) {
  const Lanes even1 = dy[0] + dy[2], odd1 = dy[1] + dy[3];
  const Lanes even2 = dy[0] + 4.f * dy[2], odd2 = 2.f * dy[1] + 8.f * dy[3];
  const Lanes even_half = dy[0] + 0.25f * dy[2], odd_half = 0.5f * dy[1] + 0.125f * dy[3];
  r[0] = dy[0];
  r[1] = even1 + odd1;
  r[2] = even1 - odd1;
  r[3] = even2 + odd2;
  r[4] = even2 - odd2;
  r[5] = even_half + odd_half;
  r[6] = even_half - odd_half;
  r[7] = dy[3];
}

// G's entries: p^k / prod_{l != j}(p_j - p_l) for the points p_j = 1 (-2/9), 2 (1/90 2^k) and 1/2
// (32/45 2^-k), and -1 for 0; infinity takes the last tap alone.
constexpr float kTwoNinths = 2.f / 9, kNinetieth = 1.f / 90, k45th = 1.f / 45;

// G g: 5 filter taps to the 8 points.
[[gnu::always_inline]] inline void filter_f4x5(const Lanes* g, Lanes* u) {
  const Lanes even1 = g[0] + g[2] + g[4], odd1 = g[1] + g[3];
  u[0] = -g[0];
  u[1] = -kTwoNinths * (even1 + odd1);
  u[2] = -kTwoNinths * (even1 - odd1);
  const Lanes even2 = kNinetieth * g[0] + 2.f * k45th * g[2] + 8.f * k45th * g[4];
  const Lanes odd2 = k45th * g[1] + 4.f * k45th * g[3];
  u[3] = even2 + odd2;
  u[4] = even2 - odd2;
  const Lanes even_half = 32.f * k45th * g[0] + 8.f * k45th * g[2] + 2.f * k45th * g[4];
  const Lanes odd_half = 16.f * k45th * g[1] + 4.f * k45th * g[3];
  u[5] = even_half + odd_half;
  u[6] = even_half - odd_half;
  u[7] = g[4];
}

// G^T z: the 8 points to 5 filter-tap gradients (the transpose of filter_f4x5).
[[gnu::always_inline]] inline void filter_gradient_f4x5(const Lanes* z, Lanes* dg) {
  const Lanes sum1 = -kTwoNinths * (z[1] + z[2]), diff1 = -kTwoNinths * (z[1] - z[2]);
  const Lanes sum2 = z[3] + z[4], diff2 = z[3] - z[4];
  const Lanes sum_half = z[5] + z[6], diff_half = z[5] - z[6];
  dg[0] = sum1 + kNinetieth * sum2 + 32.f * k45th * sum_half - z[0];
  dg[1] = diff1 + k45th * diff2 + 16.f * k45th * diff_half;
  dg[2] = sum1 + 2.f * k45th * sum2 + 8.f * k45th * sum_half;
  dg[3] = diff1 + 4.f * k45th * diff2 + 4.f * k45th * diff_half;
  dg[4] = sum1 + 8.f * k45th * sum2 + 2.f * k45th * sum_half + z[7];
}

// The five as one set for the 2-D tiling, beside F4x3.
struct F4x5 {
  static constexpr int kPoints = 8, kTaps = 5;
  static constexpr Transform1d input = input_f4x5, output = output_f4x5, gradient = gradient_f4x5,
                               filter = filter_f4x5, filter_gradient = filter_gradient_f4x5;
};

}  // namespace crest::onednn::winograd
