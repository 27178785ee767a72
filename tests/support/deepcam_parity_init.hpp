// The DeepCAM parity fixture's initial weights and batch (tests/fixtures/make_deepcam_parity.py
// computes the same numbers in numpy): a counter-based hash, so 56 M initial values need no file.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace crest::test::deepcam_parity {

constexpr uint64_t kSeed = 12345;
constexpr int64_t kHeight = 32, kWidth = 48, kBatch = 2, kChannels = 16;

inline uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// u_i in [0, 1): splitmix64's finaliser of fnv1a(key) ^ seed + i * golden, top 53 bits.
inline double hash_uniform(const std::string& key, uint64_t i) {
  uint64_t z = (fnv1a(key) ^ kSeed) + i * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

inline bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Element i of the state_dict entry `key` of shape `shape` (the reference's key and shape).
inline double initial_value(const std::string& key, const std::vector<int64_t>& shape, uint64_t i) {
  if (ends_with(key, "running_mean") || ends_with(key, "num_batches_tracked")) return 0;
  if (ends_with(key, "running_var")) return 1;
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  const double u = 2 * hash_uniform(key, i) - 1;
  if (shape.size() >= 2 && !ends_with(key, ".weights") && !ends_with(key, ".bias")) {
    const int64_t fan_in = n / shape[0];  // a conv's weight: [out, fan_in...], exactly
    return std::sqrt(3.0 / static_cast<double>(fan_in)) * u;
  }
  const double center = ends_with(key, "weight") || ends_with(key, "weights") ? 1.0 : 0.0;
  return center + 0.2 * u;
}

// x[n, c, h, w] (indexed in NCHW order) and the label of pixel (n, h, w).
inline double input_value(int64_t n, int64_t c, int64_t h, int64_t w) {
  const auto i = static_cast<uint64_t>(((n * kChannels + c) * kHeight + h) * kWidth + w);
  return 2 * hash_uniform("x", i) - 1;
}
inline int32_t label(int64_t n, int64_t h, int64_t w) {
  const double u = hash_uniform("y", static_cast<uint64_t>((n * kHeight + h) * kWidth + w));
  return u < 0.6 ? 0 : u < 0.75 ? 1 : 2;
}

}  // namespace crest::test::deepcam_parity
