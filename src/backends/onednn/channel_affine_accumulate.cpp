#include "onednn/channel_affine_accumulate.hpp"

#include <algorithm>

#include "crest/core/error.hpp"

namespace crest::onednn {

void ChannelAffineAccumulate::run(const float* x, const Coefficients& k, float* dst) const {
  // Channels-last: the channels of one position are contiguous, so they are the inner loop.
  if (l_.channels_innermost())
    channels_innermost(x, k, dst);
  else
    channel_blocks_outermost(x, k, dst);
}

void ChannelAffineAccumulate::channels_innermost(const float* x, const Coefficients& k,
                                                 float* dst) const {
  const int64_t c_count = l_.channels;
  const float *center = k.center, *a = k.a, *b = k.b;
#pragma omp parallel for collapse(3) schedule(static)
  for (int64_t n = 0; n < l_.n; ++n)
    for (int64_t i = 0; i < l_.size[0]; ++i)
      for (int64_t j = 0; j < l_.size[1]; ++j)
        for (int64_t l = 0; l < l_.size[2]; ++l) {
          const int64_t base = l_.offset(n, 0, i, j, l);
#pragma omp simd
          for (int64_t c = 0; c < c_count; ++c)
            dst[base + c] += a[c] * (x[base + c] - center[c]) + b[c];
        }
}

void ChannelAffineAccumulate::channel_blocks_outermost(const float* x, const Coefficients& k,
                                                       float* dst) const {
  const int64_t blocks = l_.blocks();
  const float *center = k.center, *a = k.a, *b = k.b;
#pragma omp parallel for collapse(3) schedule(static)
  for (int64_t n = 0; n < l_.n; ++n)
    for (int64_t cb = 0; cb < blocks; ++cb)
      for (int64_t i = 0; i < l_.size[0]; ++i) {
        const int64_t c0 = cb * l_.block;
        const int64_t in_block = std::min(l_.block, l_.channels - c0);  // the last may be short
        for (int64_t j = 0; j < l_.size[1]; ++j)
          for (int64_t l = 0; l < l_.size[2]; ++l) {
            const int64_t base = l_.offset(n, cb, i, j, l);
#pragma omp simd
            for (int64_t ci = 0; ci < in_block; ++ci)
              dst[base + ci] += a[c0 + ci] * (x[base + ci] - center[c0 + ci]) + b[c0 + ci];
          }
      }
}

}  // namespace crest::onednn
