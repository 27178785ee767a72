#include "crest/data/synthetic/random_field.hpp"

#include <algorithm>
#include <cmath>

#include "crest/core/error.hpp"

namespace crest::synthetic {
namespace {

constexpr double kTwoPi = 6.283185307179586;

inline Cplx add(Cplx a, Cplx b) { return {a.re + b.re, a.im + b.im}; }
inline Cplx sub(Cplx a, Cplx b) { return {a.re - b.re, a.im - b.im}; }
inline Cplx mul(Cplx a, Cplx b) { return {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re}; }
// a * conj(b): the inverse transform reuses the forward twiddles.
inline Cplx mul_conj(Cplx a, Cplx b) {
  return {a.re * b.re + a.im * b.im, a.im * b.re - a.re * b.im};
}

// Cubic B-spline weights for the four lattice nodes around fraction f in [0, 1).
inline void bspline_weights(double f, double w[4]) {
  const double f2 = f * f, f3 = f2 * f;
  w[0] = (1 - f) * (1 - f) * (1 - f) / 6;
  w[1] = (3 * f3 - 6 * f2 + 4) / 6;
  w[2] = (-3 * f3 + 3 * f2 + 3 * f + 1) / 6;
  w[3] = f3 / 6;
}

// The mean over f of the sum of squared weights above: the integral of B3^2, i.e. B7(0) =
// 151/315. Interpolating iid unit-variance nodes gives this variance per dimension on average.
constexpr double kBsplineVariance = 151.0 / 315.0;

// Transforms every line along one axis of an n^3 grid. The lines of one slab (fixed index on
// the third axis) are transposed into a contiguous buffer first, so strided axes are read in
// whole cache lines instead of one element per line.
void transform_axis(Cplx* grid, const FftPlan& plan, int64_t outer_stride, int64_t axis_stride,
                    bool inverse) {
  const int64_t n = plan.size();
#pragma omp parallel if (worth_parallel(n * n * n))
  {
    std::vector<Cplx> slab(static_cast<size_t>(n * n)), work(static_cast<size_t>(n));
#pragma omp for schedule(static)
    for (int64_t o = 0; o < n; ++o) {
      Cplx* base = grid + o * outer_stride;
      for (int64_t a = 0; a < n; ++a)
        for (int64_t l = 0; l < n; ++l)
          slab[static_cast<size_t>(l * n + a)] = base[a * axis_stride + l];
      for (int64_t l = 0; l < n; ++l) plan.transform(slab.data() + l * n, work.data(), inverse);
      for (int64_t a = 0; a < n; ++a)
        for (int64_t l = 0; l < n; ++l)
          base[a * axis_stride + l] = slab[static_cast<size_t>(l * n + a)];
    }
  }
}

}  // namespace

int64_t poisson(uint64_t key, uint64_t counter, double mean) {
  if (!(mean > 0)) return 0;
  if (mean < 64) {
    const double u = uniform01(key, counter);
    double p = std::exp(-mean), cdf = p;
    int64_t k = 0;
    // The cap only guards against a cdf that rounding stops just short of u.
    while (u >= cdf && k < 1000) {
      ++k;
      p *= mean / static_cast<double>(k);
      cdf += p;
    }
    return k;
  }
  // A derived key keeps these two extra draws off the counters other elements use.
  const double z = normal(rng::splitmix64_mix(key ^ 0x6A09E667F3BCC909ull), counter);
  return std::max<int64_t>(0, std::llround(mean + std::sqrt(mean) * z));
}

bool fft_length_supported(int64_t n) {
  if (n < 1) return false;
  while (n % 2 == 0) n /= 2;
  while (n % 3 == 0) n /= 3;
  return n == 1;
}

FftPlan::FftPlan(int64_t n) : n_(n) {
  if (!fft_length_supported(n))
    throw_usage("FFT length " + std::to_string(n) + " is not a product of 2s and 3s");
  for (int64_t r = n; r % 3 == 0; r /= 3) radices_.push_back(3);
  for (int64_t r = n; r % 2 == 0; r /= 2) radices_.push_back(2);
  int64_t len = n;
  for (int r : radices_) {
    const int64_t m = len / r;
    for (int64_t j = 0; j < m; ++j)
      for (int t = 0; t < r; ++t) {
        const double a = -kTwoPi * static_cast<double>(j * t) / static_cast<double>(len);
        twiddles_.push_back({std::cos(a), std::sin(a)});
      }
    len = m;
  }
}

void FftPlan::transform(Cplx* data, Cplx* work, bool inverse) const {
  // Stockham decimation in frequency: stage with radix r splits length-len sequences (stride s)
  // into r sequences of length m = len / r, writing them interleaved so the result ends in
  // natural order without a reversal pass.
  Cplx* src = data;
  Cplx* dst = work;
  int64_t len = n_, s = 1;
  const Cplx* tw = twiddles_.data();
  const double sign = inverse ? 1.0 : -1.0;
  const double sin3 = sign * 0.8660254037844386;  // sin(-+2 pi / 3)
  for (int r : radices_) {
    const int64_t m = len / r;
    for (int64_t j = 0; j < m; ++j) {
      const Cplx* w = tw + j * r;
      for (int64_t q = 0; q < s; ++q) {
        if (r == 2) {
          const Cplx a0 = src[q + s * j], a1 = src[q + s * (j + m)];
          const Cplx b1 = sub(a0, a1);
          dst[q + s * (2 * j)] = add(a0, a1);
          dst[q + s * (2 * j + 1)] = inverse ? mul_conj(b1, w[1]) : mul(b1, w[1]);
        } else {
          const Cplx a0 = src[q + s * j], a1 = src[q + s * (j + m)], a2 = src[q + s * (j + 2 * m)];
          const Cplx t1 = add(a1, a2), t2 = sub(a1, a2);
          const Cplx c = {a0.re - 0.5 * t1.re, a0.im - 0.5 * t1.im};
          const Cplx rot = {-sin3 * t2.im, sin3 * t2.re};  // i * sin3 * t2
          const Cplx b1 = add(c, rot), b2 = sub(c, rot);
          dst[q + s * (3 * j)] = add(a0, t1);
          dst[q + s * (3 * j + 1)] = inverse ? mul_conj(b1, w[1]) : mul(b1, w[1]);
          dst[q + s * (3 * j + 2)] = inverse ? mul_conj(b2, w[2]) : mul(b2, w[2]);
        }
      }
    }
    tw += len;
    std::swap(src, dst);
    len = m;
    s *= r;
  }
  if (src != data) std::copy(src, src + n_, data);
}

std::vector<double> gaussian_random_field_3d(int64_t n, uint64_t key,
                                             const std::vector<double>& amplitude_by_k2) {
  const FftPlan plan(n);
  const int64_t half = n / 2;
  CREST_CHECK(static_cast<int64_t>(amplitude_by_k2.size()) == 3 * half * half + 1,
              "amplitude table size");
  std::vector<Cplx> grid(static_cast<size_t>(n * n * n));
  auto freq = [n](int64_t i) { return 2 * i < n ? i : i - n; };
  const bool par = worth_parallel(n * n * n);
#pragma omp parallel for schedule(static) if (par)
  for (int64_t i = 0; i < n; ++i) {
    const int64_t ki = freq(i);
    for (int64_t j = 0; j < n; ++j) {
      const int64_t kj = freq(j);
      for (int64_t l = 0; l < n; ++l) {
        const int64_t kl = freq(l);
        const int64_t v = (i * n + j) * n + l;
        const double amp = amplitude_by_k2[static_cast<size_t>(ki * ki + kj * kj + kl * kl)];
        const auto [a, b] = normal_pair(key, static_cast<uint64_t>(v));
        grid[static_cast<size_t>(v)] = {amp * a, amp * b};
      }
    }
  }
  Cplx* g = grid.data();
  transform_axis(g, plan, n, n * n, /*inverse=*/true);  // axis 0: slabs of fixed j
  transform_axis(g, plan, n * n, n, /*inverse=*/true);  // axis 1: slabs of fixed i
#pragma omp parallel if (par)
  {
    std::vector<Cplx> work(static_cast<size_t>(n));
#pragma omp for schedule(static)
    for (int64_t line = 0; line < n * n; ++line) plan.transform(g + line * n, work.data(), true);
  }
  std::vector<double> field(grid.size());
#pragma omp parallel for schedule(static) if (par)
  for (int64_t v = 0; v < n * n * n; ++v)
    field[static_cast<size_t>(v)] = grid[static_cast<size_t>(v)].re;
  return field;
}

void add_smooth_noise_2d(float* field, int64_t h, int64_t w, int64_t cells_y, int64_t cells_x,
                         uint64_t key, double amplitude) {
  CREST_CHECK(h > 0 && w > 0 && cells_y > 0 && cells_x > 0, "smooth noise shape");
  // Node row j sits at y = j - 1 cells, so rows 0 and cells_y + 2 are margins that give the
  // first and last cell four neighbours without wrapping north to south.
  const int64_t node_rows = cells_y + 3;
  // The 2-D variance is kBsplineVariance^2 on average, so this gives unit variance.
  const double scale = amplitude / kBsplineVariance;
  std::vector<int64_t> x_node(static_cast<size_t>(w * 4));
  std::vector<double> x_weight(static_cast<size_t>(w * 4));
  for (int64_t x = 0; x < w; ++x) {
    const double t =
        (static_cast<double>(x) + 0.5) / static_cast<double>(w) * static_cast<double>(cells_x);
    const auto i0 = static_cast<int64_t>(std::floor(t));
    bspline_weights(t - static_cast<double>(i0), &x_weight[static_cast<size_t>(x * 4)]);
    for (int64_t k = 0; k < 4; ++k)
      x_node[static_cast<size_t>(x * 4 + k)] = ((i0 - 1 + k) % cells_x + cells_x) % cells_x;
  }
  // Pass 1: interpolate every node row along x.
  std::vector<double> rows(static_cast<size_t>(node_rows * w));
  const bool par = worth_parallel(h * w);
#pragma omp parallel if (par)
  {
    std::vector<double> nodes(static_cast<size_t>(cells_x));
#pragma omp for schedule(static)
    for (int64_t j = 0; j < node_rows; ++j) {
      for (int64_t i = 0; i < cells_x; ++i)
        nodes[static_cast<size_t>(i)] = normal(key, static_cast<uint64_t>(j * cells_x + i));
      double* out = rows.data() + j * w;
      for (int64_t x = 0; x < w; ++x) {
        const int64_t* nd = &x_node[static_cast<size_t>(x * 4)];
        const double* wt = &x_weight[static_cast<size_t>(x * 4)];
        out[x] =
            wt[0] * nodes[static_cast<size_t>(nd[0])] + wt[1] * nodes[static_cast<size_t>(nd[1])] +
            wt[2] * nodes[static_cast<size_t>(nd[2])] + wt[3] * nodes[static_cast<size_t>(nd[3])];
      }
    }
  }
  // Pass 2: interpolate along y and add.
#pragma omp parallel for schedule(static) if (par)
  for (int64_t y = 0; y < h; ++y) {
    const double t =
        (static_cast<double>(y) + 0.5) / static_cast<double>(h) * static_cast<double>(cells_y);
    const auto i0 = static_cast<int64_t>(std::floor(t));
    double wy[4];
    bspline_weights(t - static_cast<double>(i0), wy);
    const double* r0 = rows.data() + i0 * w;  // node rows i0 .. i0 + 3 = positions i0-1 .. i0+2
    const double* r1 = r0 + w;
    const double* r2 = r1 + w;
    const double* r3 = r2 + w;
    float* out = field + y * w;
    for (int64_t x = 0; x < w; ++x)
      out[x] += static_cast<float>(scale *
                                   (wy[0] * r0[x] + wy[1] * r1[x] + wy[2] * r2[x] + wy[3] * r3[x]));
  }
}

}  // namespace crest::synthetic
