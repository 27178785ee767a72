// Argument checks every backend's VectorOps makes alike, so their errors read the same whatever
// backend a run is on.
#pragma once
#include <cstdint>
#include <string>

#include "crest/core/error.hpp"

namespace crest {

inline void check_softmax_cross_entropy_sizes(int64_t n, int64_t classes, int64_t spatial,
                                              double label_smoothing) {
  if (n <= 0 || classes <= 0 || spatial <= 0)
    throw_input("softmax_cross_entropy: batch (" + std::to_string(n) + "), classes (" +
                std::to_string(classes) + ") and spatial size (" + std::to_string(spatial) +
                ") must be positive");
  if (!(label_smoothing >= 0 && label_smoothing < 1))
    throw_input("softmax_cross_entropy: label smoothing must be in [0, 1), got " +
                std::to_string(label_smoothing));
}

}  // namespace crest
