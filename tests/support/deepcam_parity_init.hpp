// The DeepCAM parity fixture's initial weights and batch (tests/fixtures/make_deepcam_parity.py
// computes the same numbers in numpy): hashed_init.hpp's values under the fixture's seed, so 56 M
// initial values need no file.
#pragma once
#include <cstdint>

#include "support/hashed_init.hpp"

namespace crest::test::deepcam_parity {

constexpr uint64_t kSeed = 12345;
constexpr int64_t kHeight = 32, kWidth = 48, kBatch = 2, kChannels = 16;

// x[n, c, h, w] (indexed in NCHW order) and the label of pixel (n, h, w).
inline double input_value(int64_t n, int64_t c, int64_t h, int64_t w) {
  const auto i = static_cast<uint64_t>(((n * kChannels + c) * kHeight + h) * kWidth + w);
  return 2 * hashed_init::hash_uniform(kSeed, "x", i) - 1;
}
inline int32_t label(int64_t n, int64_t h, int64_t w) {
  const double u =
      hashed_init::hash_uniform(kSeed, "y", static_cast<uint64_t>((n * kHeight + h) * kWidth + w));
  return u < 0.6 ? 0 : u < 0.75 ? 1 : 2;
}

}  // namespace crest::test::deepcam_parity
