// double_lanes.hpp's exp and log stay within 2 ulp of glibc's on their domains (the test is
// compiled for the baseline; the clones run the same operations in the same order).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "onednn/double_lanes.hpp"

namespace crest {
namespace {

namespace dl = onednn::double_lanes;

int64_t ulps_apart(double a, double b) {
  int64_t x, y;
  std::memcpy(&x, &a, sizeof x);
  std::memcpy(&y, &b, sizeof y);
  return x > y ? x - y : y - x;  // both positive and finite here
}

enum class Function { exp, log };

// Runs the function over `xs` eight at a time (the tail padded) and returns the largest distance
// from glibc's, naming the worst input. (No vector value crosses a call: see double_lanes.hpp.)
int64_t worst_ulps(const std::vector<double>& xs, Function f, double* worst_x) {
  int64_t worst = 0;
  for (size_t i = 0; i < xs.size(); i += dl::kLanes) {
    dl::Doubles v;
    for (int64_t l = 0; l < dl::kLanes; ++l)
      v[l] = xs[std::min(i + static_cast<size_t>(l), xs.size() - 1)];
    const dl::Doubles r = f == Function::exp ? dl::exp(v) : dl::log(v);
    for (int64_t l = 0; l < dl::kLanes; ++l) {
      const double exact = f == Function::exp ? std::exp(v[l]) : std::log(v[l]);
      const int64_t d = ulps_apart(r[l], exact);
      if (d > worst) {
        worst = d;
        *worst_x = v[l];
      }
    }
  }
  return worst;
}

TEST(OneDnnDoubleLanes, ExpIsWithinTwoUlpsDownToTheSubnormals) {
  std::mt19937_64 rng(11);
  std::vector<double> xs{0.0,
                         -0.0,
                         1e-300,
                         -1e-300,
                         -1e-17,
                         0.34657359027997264,
                         -0.34657359027997264,
                         -0.3465735902799727,
                         -1.0,
                         -707.9,
                         -708.0,
                         1.0,
                         88.7,
                         700.0,
                         709.0};
  std::uniform_real_distribution<double> wide(-708.0, 709.0), near(-2.0, 2.0);
  for (int i = 0; i < 200000; ++i) xs.push_back(i % 2 ? wide(rng) : near(rng));
  double at = 0;
  EXPECT_LE(worst_ulps(xs, Function::exp, &at), 2) << "at x = " << at;
  const dl::Doubles tiny = dl::exp(dl::Doubles{} - 708.5);
  for (int64_t l = 0; l < dl::kLanes; ++l) EXPECT_EQ(tiny[l], 0.0);
}

TEST(OneDnnDoubleLanes, LogIsWithinTwoUlpsOverThePositiveNormals) {
  std::mt19937_64 rng(12);
  std::vector<double> xs{
      1.0, 2.0,    0.5,   1.4142135623730951, 1.4142135623730949, 0.7071067811865476,
      3.0, 1e-300, 1e300, 1.0000000000000002, 0.9999999999999999};
  std::uniform_real_distribution<double> sums(1.0, 16.0), exponent(-1000.0, 1000.0);
  for (int i = 0; i < 200000; ++i) xs.push_back(i % 2 ? sums(rng) : std::exp2(exponent(rng)));
  double at = 0;
  EXPECT_LE(worst_ulps(xs, Function::log, &at), 2) << "at x = " << at;
  const dl::Doubles one = dl::log(dl::Doubles{} + 1.0);
  for (int64_t l = 0; l < dl::kLanes; ++l) EXPECT_EQ(one[l], 0.0);
}

}  // namespace
}  // namespace crest
