// Eight float64 lanes as one GCC vector value, lowered by each instruction-set copy of a loop to
// its widest registers, with the exp and log the loss loops need (cross_entropy_loop.cpp) and the
// float32 widening the optimizers' reductions use (update_loops.cpp).
//
// Why own exp and log: glibc's are scalar (its vector versions need -ffast-math), and DeepCAM's
// loss spent ~5 ms of a 350 ms bf16 step at 192x288 in them, one position at a time. These are
// the textbook reductions with polynomials long enough for double precision: both stay within
// 2 ulp of glibc's on their domains (tests/backend/onednn_double_lanes_test.cpp), and every copy
// computes the same operations in the same order (no FMA contraction: CMakeLists.txt), so the
// same bits.
//
// The helpers pass vector values, which GCC warns changes the ABI where the baseline lacks
// 64-byte registers; they are always inlined, so no call crosses an ABI.
#pragma once
#include <cstdint>
#include <cstring>

#pragma GCC diagnostic ignored "-Wpsabi"

namespace crest::onednn::double_lanes {

constexpr int64_t kLanes = 8;
using Doubles = double __attribute__((vector_size(kLanes * sizeof(double))));
using Int64s = int64_t __attribute__((vector_size(kLanes * sizeof(int64_t))));
using EightFloats = float __attribute__((vector_size(kLanes * sizeof(float))));

[[gnu::always_inline]] inline Doubles widened(const float* p) {
  EightFloats f;
  std::memcpy(&f, p, sizeof f);
  return __builtin_convertvector(f, Doubles);
}
[[gnu::always_inline]] inline void store_narrowed(float* p, Doubles v) {
  const EightFloats f = __builtin_convertvector(v, EightFloats);
  std::memcpy(p, &f, sizeof f);
}
[[gnu::always_inline]] inline Doubles from_bits(Int64s bits) {
  Doubles v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}
[[gnu::always_inline]] inline Int64s to_bits(Doubles v) {
  Int64s bits;
  std::memcpy(&bits, &v, sizeof bits);
  return bits;
}

// e^x for x <= 709 (e^709 is near double's largest). Below -708 (where e^x would be subnormal) the
// result is 0: the losses add such terms to sums of at least 1. x = k ln2 + r with |r| <= ln2/2
// (ln2 in two parts, the first with trailing zero bits so k * its value is exact), e^r by its
// Taylor series to degree 13 (truncation below 2^-55 relative), then times 2^k built in the
// exponent bits.
[[gnu::always_inline]] inline Doubles exp(Doubles x) {
  constexpr double kLog2e = 1.4426950408889634;
  constexpr double kLn2High = 6.93147180369123816490e-01;
  constexpr double kLn2Low = 1.90821492927058770002e-10;
  constexpr double kRounder = 6755399441055744.0;  // 1.5 * 2^52: adding it rounds to an integer
  const Doubles k = (x * kLog2e + kRounder) - kRounder;
  const Doubles r = (x - k * kLn2High) - k * kLn2Low;
  // 1/13!, 1/12!, ..., 1/2!, then + r + 1.
  constexpr double kInverseFactorials[] = {1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0,
                                           1.0 / 3628800.0,    1.0 / 362880.0,    1.0 / 40320.0,
                                           1.0 / 5040.0,       1.0 / 720.0,       1.0 / 120.0,
                                           1.0 / 24.0,         1.0 / 6.0,         1.0 / 2.0};
  Doubles p = Doubles{} + kInverseFactorials[0];
  for (size_t i = 1; i < sizeof kInverseFactorials / sizeof(double); ++i)
    p = p * r + kInverseFactorials[i];
  p = (p * r + 1.0) * r + 1.0;
  const Int64s exponent = (__builtin_convertvector(k, Int64s) + 1023) << 52;
  return x < -708.0 ? Doubles{} : p * from_bits(exponent);
}

// The natural log of positive normal x. x = m 2^e with m in [sqrt(1/2), sqrt(2)), then
// log m = 2 atanh(s) = 2 (s + s^3/3 + ... + s^21/21) with s = (m - 1)/(m + 1), |s| <= 0.172
// (truncation below 2^-58), and e ln2 in two parts.
[[gnu::always_inline]] inline Doubles log(Doubles x) {
  constexpr double kLn2High = 6.93147180369123816490e-01;
  constexpr double kLn2Low = 1.90821492927058770002e-10;
  constexpr double kSqrt2 = 1.4142135623730951;
  const Int64s bits = to_bits(x);
  Int64s e = ((bits >> 52) & 0x7ff) - 1023;
  Doubles m = from_bits((bits & 0x000fffffffffffff) | 0x3ff0000000000000);  // in [1, 2)
  const Int64s high = m > kSqrt2;                                           // all ones or 0
  m = high ? m * 0.5 : m;
  e -= high;                  // -(-1) = +1 where m was halved
  const Doubles f = m - 1.0;  // exact (Sterbenz: m within a factor 2 of 1)
  const Doubles s = f / (f + 2.0);
  const Doubles z = s * s;
  Doubles q = Doubles{} + 1.0 / 21.0;
  for (int odd = 19; odd >= 3; odd -= 2) q = q * z + 1.0 / odd;
  q = q * z + 1.0;
  const Doubles ed = __builtin_convertvector(e, Doubles);
  return ed * kLn2High + (2.0 * s * q + ed * kLn2Low);
}

}  // namespace crest::onednn::double_lanes
