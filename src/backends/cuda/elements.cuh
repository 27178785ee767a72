// Private to the CUDA backend: the element types its kernels read and write. Float32 is stored
// as it is; bf16 and fp16 as 16-bit codes, computed in float and rounded as crest/core/bf16.hpp
// and fp16.hpp round (mixed precision: 16-bit activations, float32 arithmetic). A kernel is a
// template over one of these; for_element_type picks the instance from a run-time dtype.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "crest/core/dtype.hpp"
#include "crest/core/error.hpp"

namespace crest::cuda {

// 16-bit codes, rounded as crest/core/bf16.hpp and fp16.hpp round, bit for bit (NaN included):
// integer code, since CUDA's own conversions make every NaN the canonical one.

__host__ __device__ inline uint32_t bits_of(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

__host__ __device__ inline float float_of(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

// bf16.hpp's float_to_bf16: the upper half, rounded to nearest even; a NaN is made quiet.
__host__ __device__ inline uint16_t to_bf16_code(float f) {
  const uint32_t u = bits_of(f);
  const uint32_t rounded = u + 0x7fffu + ((u >> 16) & 1u);
  const uint32_t quiet_nan = u | 0x400000u;
  return static_cast<uint16_t>(((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded) >> 16);
}

__host__ __device__ inline float from_bf16_code(uint16_t h) { return float_of(uint32_t{h} << 16); }

// fp16.hpp's float_to_fp16 (the host compiler's _Float16: F16C and libgcc's software conversion
// agree): rounded to nearest even, beyond the range infinite, a NaN made quiet with the top of
// its payload kept.
__host__ __device__ inline uint16_t to_fp16_code(float f) {
  const uint32_t u = bits_of(f);
  const auto sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t magnitude = u & 0x7fffffffu;
  if (magnitude > 0x7f800000u)
    return static_cast<uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
  // From 65520, halfway between 65504 and 2^16, on: the tie goes up (65504 is odd): infinite.
  if (magnitude >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (magnitude >= 0x38800000u) {  // 2^-14 and up: normal; rebias 127 -> 15, round off 13 bits
    const uint32_t rebiased = magnitude - 0x38000000u;
    return static_cast<uint16_t>(sign | ((rebiased + 0xfffu + ((rebiased >> 13) & 1u)) >> 13));
  }
  // Up to 2^-25, half the smallest subnormal (the tie goes to the even zero): zero.
  if (magnitude <= 0x33000000u) return sign;
  // Subnormal: the significand, implicit bit included, in units of 2^-24.
  const uint32_t shift = 126u - (magnitude >> 23);  // 14 .. 24
  const uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
  const uint32_t code = significand >> shift;
  const uint32_t rest = significand & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1u);
  const uint32_t up = rest > half || (rest == half && (code & 1u) != 0) ? 1u : 0u;
  return static_cast<uint16_t>(sign | (code + up));
}

// fp16.hpp's fp16_to_float: exact; a NaN is made quiet, its payload kept.
__host__ __device__ inline float from_fp16_code(uint16_t h) {
  const uint32_t sign = (uint32_t{h} & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1fu)
    return float_of(sign | 0x7f800000u | (mantissa << 13) | (mantissa != 0 ? 0x400000u : 0u));
  if (exponent != 0) return float_of(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  if (mantissa == 0) return float_of(sign);
  // Subnormal: mantissa * 2^-24, a normal float; shift the leading one into the implicit bit.
  uint32_t float_exponent = 113;
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    --float_exponent;
  }
  return float_of(sign | (float_exponent << 23) | ((mantissa & 0x3ffu) << 13));
}

// The element types: how a kernel loads a stored value as float and stores a float, so each
// kernel is written once for float32 and both 16-bit types (Storage: what memory holds).
struct Float32 {
  using Storage = float;
  static constexpr DType kDType = DType::f32;
  __host__ __device__ static float load(float v) { return v; }
  __host__ __device__ static float store(float v) { return v; }
};
struct Bf16Codes {
  using Storage = uint16_t;
  static constexpr DType kDType = DType::bf16;
  __host__ __device__ static float load(uint16_t h) { return from_bf16_code(h); }
  __host__ __device__ static uint16_t store(float f) { return to_bf16_code(f); }
};
struct Fp16Codes {
  using Storage = uint16_t;
  static constexpr DType kDType = DType::f16;
  __host__ __device__ static float load(uint16_t h) { return from_fp16_code(h); }
  __host__ __device__ static uint16_t store(float f) { return to_fp16_code(f); }
};

// What memory holds for element type E.
template <typename E>
using Stored = typename E::Storage;

// f(Float32{}), f(Bf16Codes{}) or f(Fp16Codes{}) as `dtype` says; another dtype is refused,
// naming `what`.
template <typename F>
void for_element_type(DType dtype, const char* what, F&& f) {
  switch (dtype) {
    case DType::f32:
      return f(Float32{});
    case DType::bf16:
      return f(Bf16Codes{});
    case DType::f16:
      return f(Fp16Codes{});
    default:
      throw_usage(std::string("the cuda backend's ") + what + " runs float32, bf16 or fp16, not " +
                  dtype_name(dtype));
  }
}

}  // namespace crest::cuda
