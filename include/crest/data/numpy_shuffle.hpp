// numpy's legacy `np.random.RandomState(seed).shuffle(x)`, so that crest can put a list in the
// order a reference script gave it (the DeepCAM reference shuffles its sorted file list once with
// RandomState(12345)). numpy seeds MT19937 from an integer with the standard init_genrand, which
// is std::mt19937(seed); the shuffle is Fisher-Yates from the last position down, each position
// i swapped with one drawn uniformly from [0, i] by numpy's bounded draw (random_interval).
#pragma once
#include <cstdint>
#include <random>
#include <span>

namespace crest {

// A value uniform in [0, max], drawn as numpy's random_interval draws it for max < 2^32: 32-bit
// outputs masked to the smallest all-ones mask covering max, rejected while above max.
uint32_t numpy_random_interval(std::mt19937& mt, uint32_t max);

// `x` shuffled in place exactly as RandomState(seed).shuffle shuffles a list (or a 1-d array) of
// x.size() items. Throws crest::Error (input) beyond 2^32 items, where numpy switches to 64-bit
// draws that crest does not reproduce.
void numpy_legacy_shuffle(std::span<int64_t> x, uint32_t seed);

}  // namespace crest
