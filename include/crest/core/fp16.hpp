// IEEE half precision (fp16) <-> float, rounded to nearest even, through the compiler's _Float16
// (GCC and Clang on x86-64 and AArch64: F16C/FP16 instructions when enabled, exact software
// rounding otherwise). Used to compress gradient buckets for communication (dist.compress: fp16).
// fp16 keeps 11 significant bits but only 5 exponent bits: finite values up to 65504, subnormals
// down to 6e-8; beyond that a value becomes infinite, below it zero.
#pragma once
#include <bit>
#include <cstdint>

namespace crest {

constexpr float kFp16Max = 65504.f;

inline uint16_t float_to_fp16(float f) { return std::bit_cast<uint16_t>(static_cast<_Float16>(f)); }
inline float fp16_to_float(uint16_t h) { return static_cast<float>(std::bit_cast<_Float16>(h)); }

}  // namespace crest
