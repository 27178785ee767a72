// What the tests run as one MPI job share: their process world (tests/world/main.cpp: the MPI job
// mpirun started, or one process), seeded data every rank draws alike, values written into and
// read from tensors and their comparison, and the built backends.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "crest/backends/kernels.hpp"
#include "crest/core/tensor.hpp"
#include "crest/dist/communicator.hpp"

namespace crest::test {

Communicator& world();

// Seeded values in [-1, 1), the same on every rank.
inline std::vector<double> random_values(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<double> v(n);
  for (double& x : v) x = dist(gen);
  return v;
}

// Values as doubles into a float64 or float32 tensor on the host, and back.
inline void write(const TensorView& t, const std::vector<double>& v) {
  ASSERT_EQ(static_cast<size_t>(t.desc().shape.numel()), v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    if (t.desc().dtype == DType::f64)
      t.as<double>()[i] = v[i];
    else
      t.as<float>()[i] = static_cast<float>(v[i]);
  }
}

inline std::vector<double> read(const TensorView& t) {
  std::vector<double> v(static_cast<size_t>(t.desc().shape.numel()));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = t.desc().dtype == DType::f64 ? t.as<double>()[i] : t.as<float>()[i];
  return v;
}

// The largest difference within `tol` times (1 + the largest magnitude wanted), naming `what`
// and the rank.
inline void expect_close(const std::vector<double>& got, const std::vector<double>& want,
                         double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 0, worst = 0;
  for (double w : want) scale = std::max(scale, std::fabs(w));
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
  EXPECT_LE(worst, tol * (1 + scale)) << what << " (rank " << world().rank() << ")";
}

inline bool has_backend(const std::string& name) {
  const auto names = backend_names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace crest::test
