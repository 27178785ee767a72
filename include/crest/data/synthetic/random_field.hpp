// Building blocks shared by the synthetic CosmoFlow and DeepCAM generators: counter-based random
// draws, a mixed radix-2/3 FFT, a 3-D Gaussian random field with a given power spectrum, and 2-D
// smooth noise.
//
// Every draw is a pure function of (key, counter), where the key comes from (seed, sample index,
// stream). No generator state is shared between threads, so a sample is the same bytes whatever
// the OpenMP thread count, and any sample can be made without making the ones before it.
#pragma once
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "crest/core/hash_rng.hpp"

namespace crest::synthetic {

// Loops over at most this many elements run on one thread. A sample makes dozens of parallel
// regions; on small grids their forks and barriers cost more than the work, and far more when
// other processes hold the cores (on a loaded 2-core machine, 50 samples of 96 x 144 took 24 s
// with 2 threads against 0.6 s on one). Full-size samples (768 x 1152, 96^3 and up) stay
// parallel. Results never depend on it: every element is computed the same way on any thread.
inline constexpr int64_t kParallelMinElements = int64_t{1} << 18;
inline bool worth_parallel(int64_t elements) { return elements > kParallelMinElements; }

// The key of one independent stream of draws. Each input is mixed in turn so that neighbouring
// seeds, indices and streams give unrelated keys.
inline uint64_t stream_key(uint64_t seed, int64_t index, uint64_t stream) {
  uint64_t k = rng::splitmix64_mix(seed ^ 0x243F6A8885A308D3ull);
  k = rng::splitmix64_mix(k + static_cast<uint64_t>(index) * rng::kGoldenGamma);
  return rng::splitmix64_mix(k ^ (stream * 0xD1B54A32D192ED03ull + 0x13198A2E03707344ull));
}

// Uniform in [0, 1), a multiple of 2^-53, from draw `counter` of the stream.
inline double uniform01(uint64_t key, uint64_t counter) {
  return rng::unit_double(rng::counter_bits(key, counter));
}

// Uniform in (0, 1]: never 0, so safe to take the logarithm of.
inline double uniform_open(uint64_t key, uint64_t counter) {
  return rng::unit_double_open(rng::counter_bits(key, counter));
}

inline double uniform_in(uint64_t key, uint64_t counter, double lo, double hi) {
  return lo + (hi - lo) * uniform01(key, counter);
}

// Two independent standard normals from draws 2*counter and 2*counter+1 (Box-Muller).
inline std::pair<double, double> normal_pair(uint64_t key, uint64_t counter) {
  const double r = std::sqrt(-2.0 * std::log(uniform_open(key, 2 * counter)));
  const double a = 6.283185307179586 * uniform01(key, 2 * counter + 1);
  return {r * std::cos(a), r * std::sin(a)};
}

inline double normal(uint64_t key, uint64_t counter) { return normal_pair(key, counter).first; }

// A Poisson count with this mean from draw `counter` (and, for large means, the one after).
// Inverse transform below 64, where it needs about mean+1 steps and exp(-mean) is far from
// underflow; above, the normal approximation, whose error there is below the Poisson noise itself.
int64_t poisson(uint64_t key, uint64_t counter, double mean);

// A complex number as two doubles. std::complex's multiply goes through a NaN-checking library
// call without -ffast-math; the FFT's inner loop should not.
struct Cplx {
  double re = 0, im = 0;
};

// Plan for complex FFTs of one length n = 2^a * 3^b (self-sorting Stockham, so no bit reversal).
class FftPlan {
 public:
  explicit FftPlan(int64_t n);
  int64_t size() const { return n_; }
  // In-place transform of n contiguous values; `work` holds n values of scratch. Forward uses
  // exp(-2 pi i jk/n), inverse exp(+2 pi i jk/n); neither divides by n.
  void transform(Cplx* data, Cplx* work, bool inverse) const;

 private:
  int64_t n_;
  std::vector<int> radices_;
  std::vector<Cplx> twiddles_;  // per stage, w^(j*t) for j < n_stage/r, t < r, forward sign
};

// True when n > 0 factors into 2s and 3s only (the lengths FftPlan supports).
bool fft_length_supported(int64_t n);

// A real Gaussian random field on a periodic n^3 grid: the real part of the inverse FFT of
// amplitude(|k|^2) * (a + ib) with a, b iid N(0, 1), k the integer wave vector in
// [-n/2, n/2)^3. amplitude_by_k2 has 3*(n/2)^2 + 1 entries (index |k|^2); the field's variance at
// a point is sum over all k of amplitude^2. Returns n^3 values in C order.
std::vector<double> gaussian_random_field_3d(int64_t n, uint64_t key,
                                             const std::vector<double>& amplitude_by_k2);

// Adds amplitude * (smooth noise of unit variance) to an h x w row-major field: N(0, 1) values on
// a cells_y x cells_x lattice spanning the field, interpolated with cubic B-splines (smooth, and
// nearly the same variance everywhere). Periodic along x (longitude), not along y.
void add_smooth_noise_2d(float* field, int64_t h, int64_t w, int64_t cells_y, int64_t cells_x,
                         uint64_t key, double amplitude);

}  // namespace crest::synthetic
