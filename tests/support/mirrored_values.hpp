// Test support for the CUDA backend's tests: the same values in host memory (for the reference
// backend) and in device memory (for cuda), compared after copying the device's back through the
// backend's memory resource.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "crest/backends/kernels.hpp"
#include "crest/core/tensor.hpp"

namespace crest::test {

// Relative bound (max error over 1 + max magnitude) for one float32 pass.
inline constexpr double kTolerance = 1e-5;

inline bool cuda_usable() {
  const auto names = backend_names();
  return std::find(names.begin(), names.end(), "cuda") != names.end();
}

#define CREST_SKIP_WITHOUT_A_CUDA_DEVICE()                                     \
  do {                                                                         \
    if (!::crest::test::cuda_usable())                                         \
      GTEST_SKIP() << "no usable CUDA device (built without CUDA, or no GPU)"; \
  } while (0)

inline std::vector<float> pattern(size_t n, unsigned salt) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<float>((i * 2654435761u + size_t{salt} * 97u) % 2001) / 1000.f - 1.f;
  return v;
}

inline double rel_error(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0, mag = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, std::abs(static_cast<double>(got[i]) - want[i]));
    mag = std::max(mag, std::abs(static_cast<double>(want[i])));
  }
  return err / (1 + mag);
}

// One tensor on both backends: host memory for the reference, device memory for cuda.
class MirroredValues {
 public:
  MirroredValues(Backend& cuda, size_t count, unsigned salt)
      : cuda_(cuda),
        host_(pattern(count, salt)),
        device_(count * sizeof(float), 256, cuda.memory()) {
    cuda.memory().copy_to_device(device_.data(), host_.data(), count * sizeof(float));
  }
  float* ref() { return host_.data(); }
  void* dev() const { return device_.data(); }
  std::vector<float> device_values() const {
    std::vector<float> out(host_.size());
    cuda_.stream().synchronize();
    cuda_.memory().copy_to_host(out.data(), device_.data(), out.size() * sizeof(float));
    return out;
  }
  double error() const { return rel_error(device_values(), host_); }

 private:
  Backend& cuda_;
  std::vector<float> host_;
  Buffer device_;
};

}  // namespace crest::test
