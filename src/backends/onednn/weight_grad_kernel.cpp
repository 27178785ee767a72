#include "onednn/weight_grad_kernel.hpp"

namespace crest::onednn {

void interleave_taps(const float* per_tap, int64_t taps, int64_t rows, int64_t cols, float* out) {
  const auto slice = static_cast<size_t>(rows * cols);
#pragma omp parallel for schedule(static) if (rows * cols * taps >= (1 << 16))
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      for (int64_t k = 0; k < taps; ++k)
        out[(r * cols + c) * taps + k] =
            per_tap[static_cast<size_t>(k) * slice + static_cast<size_t>(r * cols + c)];
}

}  // namespace crest::onednn
