// Comparing two weight files that runs wrote (--save-weights, float32 or float64): how far apart
// two trainings ended, for tests of runs that must train alike (ranks vs one process,
// accumulation, synchronised batch norm, spatial splits).
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "crest/data/safetensors.hpp"

namespace crest::test {

// Element i of a float32 or float64 tensor.
inline double weight_at(const SafetensorsTensor& t, int64_t i) {
  return t.dtype == SafetensorsDType::F64 ? reinterpret_cast<const double*>(t.data)[i]
                                          : double(reinterpret_cast<const float*>(t.data)[i]);
}

// Largest per-tensor relative difference ||a - b|| / ||a|| (names, shapes and dtypes must
// agree), over the tensors whose name `which` accepts (every one by default).
inline double worst_relative_difference(
    const std::string& a_path, const std::string& b_path,
    const std::function<bool(const std::string&)>& which = nullptr) {
  SafetensorsFile a(a_path), b(b_path);
  EXPECT_EQ(a.names(), b.names());
  double worst = 0;
  for (const auto& t : a.tensors()) {
    if (which && !which(t.name)) continue;
    const SafetensorsTensor& u = b.at(t.name);
    EXPECT_EQ(t.shape, u.shape) << t.name;
    EXPECT_TRUE(t.dtype == u.dtype) << t.name;
    double diff = 0, norm = 0;
    for (int64_t i = 0; i < t.numel(); ++i) {
      const double x = weight_at(t, i), y = weight_at(u, i);
      diff += (x - y) * (x - y);
      norm += x * x;
    }
    worst = std::max(worst, std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30));
  }
  return worst;
}

// ||a - b|| / ||a|| over every tensor together, the dtypes free to differ (a float32 run against
// a float64 one): how far apart two trainings ended as a whole, where a single tensor can scatter
// with rounding alone (DeepCAM's batch-norm biases after a LAMB step).
inline double whole_relative_difference(const std::string& a_path, const std::string& b_path) {
  SafetensorsFile a(a_path), b(b_path);
  std::vector<std::string> a_names = a.names(), b_names = b.names();
  std::sort(a_names.begin(), a_names.end());  // a file's order depends on its dtypes
  std::sort(b_names.begin(), b_names.end());
  EXPECT_EQ(a_names, b_names);
  const auto is_float = [](const SafetensorsTensor& t) {
    return t.dtype == SafetensorsDType::F32 || t.dtype == SafetensorsDType::F64;
  };
  double diff = 0, norm = 0;
  for (const auto& t : a.tensors()) {
    const SafetensorsTensor& u = b.at(t.name);
    if (!is_float(t) || !is_float(u)) {  // batch norm's step counts
      EXPECT_EQ(t.dtype, u.dtype) << t.name;
      continue;
    }
    EXPECT_EQ(t.shape, u.shape) << t.name;
    for (int64_t i = 0; i < t.numel(); ++i) {
      const double x = weight_at(t, i), y = weight_at(u, i);
      diff += (x - y) * (x - y);
      norm += x * x;
    }
  }
  return std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
}

// Every tensor of two safetensors files, byte for byte (metadata aside: it names paths): for runs
// that must end bit-identical (a resumed run and a straight one).
inline void expect_same_tensors(const std::string& a, const std::string& b) {
  const SafetensorsFile fa(a), fb(b);
  ASSERT_EQ(fa.names(), fb.names());
  for (const auto& t : fa.tensors()) {
    const auto& u = fb.at(t.name);
    ASSERT_EQ(t.bytes, u.bytes) << t.name;
    EXPECT_EQ(std::memcmp(t.data, u.data, t.bytes), 0)
        << t.name << " differs between " << a << " and " << b;
  }
}

}  // namespace crest::test
