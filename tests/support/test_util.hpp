// Small helpers shared by the tests.
#pragma once
#include <cmath>
#include <cstdint>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "crest/backends/kernels.hpp"
#include "crest/core/tensor.hpp"

namespace crest::test {

inline void fill_uniform(const TensorView& t, uint64_t seed, double lo = -1, double hi = 1) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  const auto n = static_cast<size_t>(t.numel());
  if (t.dtype() == DType::f32)
    for (size_t i = 0; i < n; ++i) t.as<float>()[i] = static_cast<float>(u(g));
  else if (t.dtype() == DType::f64)
    for (size_t i = 0; i < n; ++i) t.as<double>()[i] = u(g);
}

inline double element(const TensorView& t, size_t i) {
  return t.dtype() == DType::f32 ? static_cast<double>(t.as<float>()[i]) : t.as<double>()[i];
}

// max |a - b| / (1 + max |b|) over the elements: a scale-aware distance for backend agreement.
inline double rel_distance(const TensorView& a, const TensorView& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < static_cast<size_t>(b.numel()); ++i) {
    diff = std::max(diff, std::abs(element(a, i) - element(b, i)));
    scale = std::max(scale, std::abs(element(b, i)));
  }
  return diff / (1 + scale);
}

// A whole file's bytes ("" when it cannot be read).
inline std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

inline std::string source_path(const std::string& rel) {
  return std::string(CREST_SOURCE_DIR) + "/" + rel;
}

// Whether a backend is built (oneDNN is optional: CREST_WITH_ONEDNN, found at configure time).
inline bool has_backend(const std::string& name) {
  for (const std::string& n : backend_names())
    if (n == name) return true;
  return false;
}

// Skips the calling test when `name` is not built.
#define CREST_SKIP_WITHOUT_BACKEND(name) \
  if (!::crest::test::has_backend(name)) GTEST_SKIP() << "backend '" << (name) << "' is not built"

}  // namespace crest::test
