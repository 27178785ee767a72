// The host loops behind VectorOps::narrow and widen (16-bit floats for communication), shared by
// the CPU backends so both round exactly as crest/core/bf16.hpp and fp16.hpp do.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "crest/core/bf16.hpp"
#include "crest/core/dtype.hpp"
#include "crest/core/error.hpp"
#include "crest/core/fp16.hpp"

namespace crest {

inline void require_float16(DType t, const char* what) {
  if (t != DType::bf16 && t != DType::f16)
    throw_usage(std::string(what) + ": 16-bit codes are bf16 or f16, got " + dtype_name(t));
}

// dst[i] = code of (float(x[i]) * scale) for i in [lo, hi); returns the largest magnitude seen
// (NaN skipped: std::max keeps the running value when compared with NaN).
template <typename T>
float narrow_range(const T* x, float scale, uint16_t* dst, size_t lo, size_t hi, DType to) {
  float largest = 0;
  if (to == DType::bf16) {
    for (size_t i = lo; i < hi; ++i) {
      const float v = static_cast<float>(x[i]) * scale;
      largest = std::max(largest, std::abs(v));
      dst[i] = float_to_bf16(v);
    }
  } else {
    for (size_t i = lo; i < hi; ++i) {
      const float v = static_cast<float>(x[i]) * scale;
      largest = std::max(largest, std::abs(v));
      dst[i] = float_to_fp16(v);
    }
  }
  return largest;
}

template <typename T>
void widen_range(const uint16_t* src, T* dst, size_t lo, size_t hi, DType from) {
  if (from == DType::bf16)
    for (size_t i = lo; i < hi; ++i) dst[i] = static_cast<T>(bf16_to_float(src[i]));
  else
    for (size_t i = lo; i < hi; ++i) dst[i] = static_cast<T>(fp16_to_float(src[i]));
}

}  // namespace crest
