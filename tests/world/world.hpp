// What the tests run as one MPI job share: their process world (tests/world/main.cpp: the MPI job
// mpirun started, or one process), seeded data every rank draws alike, and the built backends.
#pragma once
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "crest/backends/kernels.hpp"
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

inline bool has_backend(const std::string& name) {
  const auto names = backend_names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace crest::test
