// Small helpers shared by the tests.
#pragma once
#include <cmath>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <random>
#include <regex>
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

// Whether `text` (a summary line, a format's description) names one of oneDNN's blocked channel
// layouts, of either width: nChw16c where the CPU has AVX-512, nChw8c where it has AVX2 only.
inline bool names_blocked_channels(const std::string& text) {
  static const std::regex blocked("nC(w|hw|dhw)(8|16)c");
  return std::regex_search(text, blocked);
}

// The first activation layout `text` (a summary line) names: "nChw16c", "channels_last", ...
inline std::string layout_named_in(const std::string& text) {
  static const std::regex layout("nC(w|hw|dhw)(8|16)c|channels_last|plain");
  std::smatch m;
  return std::regex_search(text, m, layout) ? m.str() : "";
}

// Why `backend` refuses to compute in `dtype` on this CPU (bf16 without AVX512_BF16, fp16
// without AVX512_FP16, as oneDNN's capped ISA sees it), or "" where it computes in it. Tests
// that cover a 16-bit type skip that part with this reason where the CPU cannot run it, so the
// suite checks what it can on every instruction-set level instead of failing on AVX2.
inline std::string dtype_refusal(const std::string& backend, DType dtype) {
  if (!has_backend(backend)) return "backend '" + backend + "' is not built";
  const Support s = make_backend(backend)->supports_dtype(dtype);
  return s ? "" : s.reason;
}

// Skips the part of a test (one loop round) that needs `dtype`, saying why.
#define CREST_CONTINUE_WITHOUT_DTYPE(backend, dtype)                                               \
  if (const std::string crest_why_ = ::crest::test::dtype_refusal(backend, dtype);                 \
      !crest_why_.empty()) {                                                                       \
    std::cout << "[ not run  ] " << ::crest::dtype_name(dtype) << " part: " << crest_why_ << "\n"; \
    continue;                                                                                      \
  }

// Skips the calling test where `backend` cannot compute in `dtype` on this CPU.
#define CREST_SKIP_WITHOUT_DTYPE(backend, dtype)                                   \
  if (const std::string crest_why_ = ::crest::test::dtype_refusal(backend, dtype); \
      !crest_why_.empty())                                                         \
  GTEST_SKIP() << crest_why_

}  // namespace crest::test
