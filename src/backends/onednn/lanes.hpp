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
#include <algorithm>
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

// Channel counts that are not a multiple of 16 end in a short lane block: `count` (1 to 16) of
// its lanes are channels, the rest belong to the next pixel (channels-last) or lie past the end.
// Loops over such blocks read the first `count` lanes (the rest as zeros) and write only those.
constexpr int64_t padded_to_lanes(int64_t channels) {
  return (channels + kLanes - 1) / kLanes * kLanes;
}
inline int64_t lanes_in_block(int64_t channels, int64_t block) {
  return std::min(kLanes, channels - block * kLanes);
}
template <typename T>
[[gnu::always_inline]] inline Lanes load_first(const T* p, int64_t count) {
  if (count == kLanes) return load(p);
  T full[kLanes] = {};
  std::memcpy(full, p, static_cast<size_t>(count) * sizeof(T));
  return load(full);
}

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

template <typename T>
[[gnu::always_inline]] inline void store_first(T* p, Lanes v, int64_t count) {
  if (count == kLanes) return store(p, v);
  T full[kLanes];
  store(full, v);
  std::memcpy(p, full, static_cast<size_t>(count) * sizeof(T));
}

}  // namespace crest::onednn::lanes
