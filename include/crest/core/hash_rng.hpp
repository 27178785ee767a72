// Counter-based random numbers: SplitMix64's output function applied to an arithmetic sequence.
// A draw is a pure function of (key, counter), so there is no generator state to share between
// threads, any draw can be made without the ones before it, and results do not depend on the
// thread count. Used by the synthetic data, the dummy dataset and the epoch shuffles, and meant
// for the dropout masks and the executor's step seeds (which have their own copies for now).
//
// The functions live in crest::rng; src/backends/dropout_hash.hpp still defines its own
// crest::splitmix64_mix, and the two names must not collide in a file that includes both.
#pragma once
#include <cstdint>

namespace crest::rng {

// 2^64 / golden ratio, odd: SplitMix64's increment ("gamma").
inline constexpr uint64_t kGoldenGamma = 0x9E3779B97F4A7C15ull;

// SplitMix64's output function: a bijective mixer whose outputs pass BigCrush when fed an
// arithmetic sequence such as key + i * kGoldenGamma.
constexpr uint64_t splitmix64_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// One SplitMix64 step from state z: the output for state z + gamma. Also a good hash of z.
constexpr uint64_t splitmix64(uint64_t z) { return splitmix64_mix(z + kGoldenGamma); }

// 64 random bits for draw `counter` of the stream `key`: SplitMix64 over the arithmetic
// sequence key + (counter + 1) * gamma, the construction SplitMix64 itself is tested with.
constexpr uint64_t counter_bits(uint64_t key, uint64_t counter) {
  return splitmix64_mix(key + (counter + 1) * kGoldenGamma);
}

// The top 53 bits as a double in [0, 1): a multiple of 2^-53, every value equally likely.
constexpr double unit_double(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

// The top 53 bits as a double in (0, 1], half a step up: never 0, so safe to take the log of.
// (The top value, 1 - 2^-54, rounds to 1.0.)
constexpr double unit_double_open(uint64_t bits) {
  return (static_cast<double>(bits >> 11) + 0.5) * 0x1.0p-53;
}

}  // namespace crest::rng
