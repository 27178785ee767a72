// 16 float32 lanes as one GCC vector value, which each instruction-set copy of a loop lowers to its
// widest registers (one zmm on AVX-512, two ymm on AVX2, four xmm on the baseline): crest's own
// loops over oneDNN's 16-channel blocks (depthwise_dilated.cpp) and 16x16 weight tiles
// (weight_repack.cpp). Plain loops over 16 lanes were unrolled into scalar code instead: the
// bf16 widening defeated the vectoriser.
//
// The helpers take and return such values, which GCC warns changes the ABI where the baseline
// target lacks 64-byte registers; they are always inlined, so no call crosses an ABI. Hence the
// warning is off in every file that includes this one.
#pragma once
#include <cstdint>
#include <cstring>

#pragma GCC diagnostic ignored "-Wpsabi"

namespace crest::onednn::lanes {

constexpr int64_t kLanes = 16;
using Lanes = float __attribute__((vector_size(kLanes * sizeof(float))));
using LaneBits = uint32_t __attribute__((vector_size(kLanes * sizeof(uint32_t))));
using LaneCodes = uint16_t __attribute__((vector_size(kLanes * sizeof(uint16_t))));
using LaneIndex = int32_t __attribute__((vector_size(kLanes * sizeof(int32_t))));

[[gnu::always_inline]] inline Lanes load(const float* p) {
  Lanes v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
[[gnu::always_inline]] inline Lanes load(const uint16_t* p) {
  LaneCodes codes;
  std::memcpy(&codes, p, sizeof codes);
  const LaneBits bits = __builtin_convertvector(codes, LaneBits) << 16;
  Lanes v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}
[[gnu::always_inline]] inline void store(float* p, Lanes v) { std::memcpy(p, &v, sizeof v); }

// Lane l of the result is lane m[l] of x (m[l] < 16) or lane m[l] - 16 of y: one two-source
// permute (vpermt2ps on AVX-512) with GCC; lane by lane elsewhere (clang, for the tools).
[[gnu::always_inline]] inline Lanes shuffle(Lanes x, Lanes y, LaneIndex m) {
#if defined(__clang__)
  Lanes r;
  for (int l = 0; l < kLanes; ++l) r[l] = m[l] < kLanes ? x[m[l]] : y[m[l] - kLanes];
  return r;
#else
  return __builtin_shuffle(x, y, m);
#endif
}

// Each lane rounded to bfloat16 in its upper 16 bits, as crest::float_to_bf16 rounds (to
// nearest even, NaN kept quiet): the same bits.
[[gnu::always_inline]] inline LaneBits bf16_rounded(Lanes v) {
  LaneBits u;
  std::memcpy(&u, &v, sizeof u);
  const LaneBits rounded = u + 0x7fffu + ((u >> 16) & 1u);
  return (u & 0x7fffffffu) > 0x7f800000u ? (u | 0x400000u) : rounded;
}
[[gnu::always_inline]] inline void store(uint16_t* p, Lanes v) {
  const LaneCodes codes = __builtin_convertvector(bf16_rounded(v) >> 16, LaneCodes);
  std::memcpy(p, &codes, sizeof codes);
}

}  // namespace crest::onednn::lanes
