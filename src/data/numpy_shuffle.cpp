#include "crest/data/numpy_shuffle.hpp"

#include <utility>

#include "crest/core/error.hpp"

namespace crest {

uint32_t numpy_random_interval(std::mt19937& mt, uint32_t max) {
  if (max == 0) return 0;  // numpy draws nothing then: the generator's state stays as it is
  uint32_t mask = max;
  for (int shift = 1; shift < 32; shift *= 2) mask |= mask >> shift;
  uint32_t value = 0;
  do {
    value = static_cast<uint32_t>(mt()) & mask;
  } while (value > max);
  return value;
}

void numpy_legacy_shuffle(std::span<int64_t> x, uint32_t seed) {
  if (x.size() > (uint64_t{1} << 32))
    throw_input("cannot shuffle " + std::to_string(x.size()) +
                " items as numpy does: beyond 2^32 items numpy draws 64-bit values, which crest "
                "does not reproduce");
  std::mt19937 mt(seed);
  for (size_t i = x.size(); i-- > 1;) {
    const size_t j = numpy_random_interval(mt, static_cast<uint32_t>(i));
    std::swap(x[i], x[j]);
  }
}

}  // namespace crest
