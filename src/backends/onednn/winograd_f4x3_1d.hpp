// The 1-D transforms of Winograd's F(4, 3) with the points 0, +-1, +-2 and infinity (Lavin & Gray,
// 2016), on 16-channel lane blocks: the 2-D F(4x4, 3x3) (winograd_2d.hpp) and the 3-D
// F(4x4x4, 3x3x3) (winograd_f4x3_3d.hpp) apply them along each axis of a tile. Always inlined, so
// each instruction-set copy of a transform loop (widest_vectors.hpp) gets its own.
#pragma once
#include "onednn/lanes.hpp"

namespace crest::onednn::winograd {

using lanes::Lanes;

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

// The five transforms of F(4, 3) as one set, for the 2-D tiling (winograd_2d.hpp), which also
// takes F(4, 5) (winograd_f4x5_1d.hpp): kPoints per axis, kTaps filter taps.
struct F4x3 {
  static constexpr int kPoints = 6, kTaps = 3;
  static constexpr Transform1d input = input_1d, output = output_1d, gradient = gradient_1d,
                               filter = filter_1d, filter_gradient = filter_gradient_1d;
};

// An activation fused into the forward's output transform (ConvDesc::post_op): ReLU, or leaky ReLU
// with its negative slope (CosmoFlow's LeakyReLU(0.3)).
struct OutputActivation {
  bool on = false;
  float negative_slope = 0.f;
};

[[gnu::always_inline]] inline Lanes activated(Lanes v, const OutputActivation& a) {
  if (!a.on) return v;
  const Lanes scaled = a.negative_slope * v;
  return v > 0.f ? v : scaled;
}

}  // namespace crest::onednn::winograd
