// Helpers for gradient checks by central differences in double precision.
//
// Every check uses a scalar objective L = sum(r * output) with a fixed random r, so the analytic
// gradient is the kernel's backward called with diff_dst = r, and the numerical one is
// (L(x + h e_i) - L(x - h e_i)) / 2h for each element i of each input.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace crest::gradcheck {

// Uniform values in [lo, hi), reproducible from the seed.
inline std::vector<double> random_vector(size_t count, uint64_t seed, double lo = -1.0,
                                         double hi = 1.0) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(count);
  for (double& x : v) x = dist(rng);
  return v;
}

// Uniform values in [-1, 1) with |x| >= margin: keeps ReLU-like kinks out of the difference step.
inline std::vector<double> random_away_from_zero(size_t count, uint64_t seed,
                                                 double margin = 1e-2) {
  std::vector<double> v = random_vector(count, seed);
  for (double& x : v)
    if (std::abs(x) < margin) x = x < 0 ? x - margin : x + margin;
  return v;
}

// A random permutation of an evenly spaced grid centred on 0: all values distinct and at least
// `spacing` apart, so a max-pool argmax cannot change within a step h << spacing.
inline std::vector<double> distinct_values(size_t count, uint64_t seed, double spacing = 0.01) {
  std::vector<double> v(count);
  for (size_t i = 0; i < count; ++i)
    v[i] = (static_cast<double>(i) - static_cast<double>(count) / 2.0) * spacing;
  std::mt19937_64 rng(seed);
  std::shuffle(v.begin(), v.end(), rng);
  return v;
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  return std::inner_product(a.begin(), a.end(), b.begin(), 0.0);
}

// A buffer pre-filled with NaN, so a backward that accumulates instead of overwriting fails.
inline std::vector<double> poisoned(size_t count) {
  return std::vector<double>(count, std::numeric_limits<double>::quiet_NaN());
}

struct Tolerance {
  double step = 1e-5;  // h: small against the kinks avoided, large against rounding in L
  double rtol = 1e-6;
  double atol = 1e-8;  // for gradients that are exactly zero analytically
};

// Compares `analytic` with the central-difference gradient of `loss` wrt every element of `x`.
// `loss` must read x (captured by reference); x is restored afterwards.
inline void expect_gradient(const std::string& what, std::vector<double>& x,
                            const std::vector<double>& analytic,
                            const std::function<double()>& loss, Tolerance tol = {}) {
  ASSERT_EQ(x.size(), analytic.size()) << what;
  int mismatches = 0;
  double worst = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + tol.step;
    const double plus = loss();
    x[i] = saved - tol.step;
    const double minus = loss();
    x[i] = saved;
    const double numeric = (plus - minus) / (2.0 * tol.step);
    const double error = std::abs(analytic[i] - numeric);
    const double allowed = tol.rtol * std::max(std::abs(analytic[i]), std::abs(numeric)) + tol.atol;
    worst = std::max(worst, error);
    if (!(error <= allowed) && ++mismatches <= 5)
      ADD_FAILURE() << what << "[" << i << "]: analytic " << analytic[i] << ", numeric " << numeric
                    << " (error " << error << ", allowed " << allowed << ")";
  }
  EXPECT_EQ(mismatches, 0) << what << ": " << mismatches << " of " << x.size()
                           << " elements differ; worst absolute error " << worst;
}

}  // namespace crest::gradcheck
