// Initial weights and batches for the parity fixtures of networks too large to store (DeepCAM,
// ResNet-50): every value is a counter-based hash of a key and an index, computed alike here and
// in tests/fixtures/hashed_init.py (the two must agree bit for bit), so a fixture keeps only what
// training produces.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace crest::test::hashed_init {

inline uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// u_i in [0, 1): splitmix64's finaliser of fnv1a(key) ^ seed + i * golden, top 53 bits.
inline double hash_uniform(uint64_t seed, const std::string& key, uint64_t i) {
  uint64_t z = (fnv1a(key) ^ seed) + i * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

inline bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Element i of the state_dict entry `key` of shape `shape` (the reference's key and shape): a
// weight of 2 or more dimensions (DeepCAM's image-pool affine `.weights` excepted) uniform with
// variance 1 / fan_in, a scale 1 + 0.2 u, a bias 0.2 u, running statistics 0 and 1.
inline double initial_value(uint64_t seed, const std::string& key,
                            const std::vector<int64_t>& shape, uint64_t i) {
  if (ends_with(key, "running_mean") || ends_with(key, "num_batches_tracked")) return 0;
  if (ends_with(key, "running_var")) return 1;
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  const double u = 2 * hash_uniform(seed, key, i) - 1;
  if (shape.size() >= 2 && !ends_with(key, ".weights") && !ends_with(key, ".bias")) {
    const int64_t fan_in = n / shape[0];  // a weight: [out, fan_in...], exactly
    return std::sqrt(3.0 / static_cast<double>(fan_in)) * u;
  }
  const double center = ends_with(key, "weight") || ends_with(key, "weights") ? 1.0 : 0.0;
  return center + 0.2 * u;
}

}  // namespace crest::test::hashed_init
