// The dropout mask as a pure function of (seed, element index), shared by every backend.
//
// A counter-based mask lets backward recompute the mask instead of storing it, and sharing this
// one function makes the reference and optimized backends drop exactly the same elements, so
// their outputs can be compared bit for bit in structure.
#pragma once
#include <cstdint>

namespace crest {

// The splitmix64 output function: a bijective mixer whose outputs pass BigCrush when fed an
// arithmetic sequence, which is exactly what (seed stream + i * gamma) is.
inline uint64_t splitmix64_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform double in [0, 1) for element i of the mask with this seed. The seed is mixed first so
// that nearby seeds (seed, seed + 1: consecutive steps) start unrelated sequences.
inline double dropout_uniform(uint64_t seed, uint64_t i) {
  constexpr uint64_t kGoldenGamma = 0x9E3779B97F4A7C15ull;
  const uint64_t z = splitmix64_mix(seed) + (i + 1) * kGoldenGamma;
  // The top 53 bits fill a double's mantissa exactly: every value is a multiple of 2^-53.
  return static_cast<double>(splitmix64_mix(z) >> 11) * (1.0 / 9007199254740992.0);
}

}  // namespace crest
