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

#include "crest/data/safetensors.hpp"

namespace crest::test {

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
    const bool f64 = t.dtype == SafetensorsDType::F64;
    const auto value = [f64](const std::byte* data, int64_t i) {
      return f64 ? reinterpret_cast<const double*>(data)[i]
                 : double(reinterpret_cast<const float*>(data)[i]);
    };
    double diff = 0, norm = 0;
    for (int64_t i = 0; i < t.numel(); ++i) {
      const double x = value(t.data, i), y = value(u.data, i);
      diff += (x - y) * (x - y);
      norm += x * x;
    }
    worst = std::max(worst, std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30));
  }
  return worst;
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
