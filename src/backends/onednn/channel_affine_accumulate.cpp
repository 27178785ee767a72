#include "onednn/channel_affine_accumulate.hpp"

#include <algorithm>
#include <cstdint>

#include "crest/core/bf16.hpp"
#include "crest/core/error.hpp"
#include "crest/core/fp16.hpp"

namespace crest::onednn {
namespace {

// How the loops read and write one element of each dtype: in float.
struct F32 {
  using T = float;
  static float load(T v) { return v; }
  static T store(float v) { return v; }
};
struct Bf16 {
  using T = uint16_t;
  static float load(T v) { return bf16_to_float(v); }
  static T store(float v) { return float_to_bf16(v); }
};
struct F16 {
  using T = uint16_t;
  static float load(T v) { return fp16_to_float(v); }
  static T store(float v) { return float_to_fp16(v); }
};

template <typename E>
void accumulate(const typename E::T* x, typename E::T* dst, int64_t i, float center, float a,
                float b) {
  dst[i] = E::store(E::load(dst[i]) + a * (E::load(x[i]) - center) + b);
}

}  // namespace

void ChannelAffineAccumulate::run(const void* x, const Coefficients& k, void* dst) const {
  using dt = dnnl::memory::data_type;
  // Channels-last: the channels of one position are contiguous, so they are the inner loop.
  const bool inner = l_.channels_innermost();
  switch (l_.dtype) {
    case dt::f32:
      return inner ? channels_innermost<F32>(x, k, dst) : channel_blocks_outermost<F32>(x, k, dst);
    case dt::bf16:
      return inner ? channels_innermost<Bf16>(x, k, dst)
                   : channel_blocks_outermost<Bf16>(x, k, dst);
    case dt::f16:
      return inner ? channels_innermost<F16>(x, k, dst) : channel_blocks_outermost<F16>(x, k, dst);
    default:
      CREST_CHECK(false, "ChannelAffineAccumulate: unsupported dtype");
  }
}

template <typename E>
void ChannelAffineAccumulate::channels_innermost(const void* x_v, const Coefficients& k,
                                                 void* dst_v) const {
  const auto* x = static_cast<const typename E::T*>(x_v);
  auto* dst = static_cast<typename E::T*>(dst_v);
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
            accumulate<E>(x, dst, base + c, center[c], a[c], b[c]);
        }
}

template <typename E>
void ChannelAffineAccumulate::channel_blocks_outermost(const void* x_v, const Coefficients& k,
                                                       void* dst_v) const {
  const auto* x = static_cast<const typename E::T*>(x_v);
  auto* dst = static_cast<typename E::T*>(dst_v);
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
              accumulate<E>(x, dst, base + ci, center[c0 + ci], a[c0 + ci], b[c0 + ci]);
          }
      }
}

}  // namespace crest::onednn
