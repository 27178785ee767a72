// bfloat16 <-> float: the upper 16 bits of an IEEE float, rounded to nearest even (as oneDNN,
// PyTorch and TensorFlow round). Used to compress gradient buckets for communication.
#pragma once
#include <cstdint>
#include <cstring>

namespace crest {

// Without a branch (NaN chosen by a select), so that loops calling it vectorise.
inline uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  const uint32_t rounded = u + 0x7fffu + ((u >> 16) & 1u);  // to nearest, ties to even
  const uint32_t quiet_nan = u | 0x400000u;                 // NaN stays NaN
  return static_cast<uint16_t>(((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded) >> 16);
}

inline float bf16_to_float(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace crest
