// bfloat16 <-> float: the upper 16 bits of an IEEE float, rounded to nearest even (as oneDNN,
// PyTorch and TensorFlow round). Used to compress gradient buckets for communication.
#pragma once
#include <cstdint>
#include <cstring>

namespace crest {

inline uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu))
    return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN stays NaN
  u += 0x7fffu + ((u >> 16) & 1u);                   // round to nearest, ties to even
  return static_cast<uint16_t>(u >> 16);
}

inline float bf16_to_float(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace crest
