// A float32 array into the 16-bit codes of bf16 or fp16 (rounded to nearest even, as
// bf16.hpp and fp16.hpp round one value): the loader's 16-bit batches and BatchFeed's 16-bit
// inputs write them this way, so both round exactly as the backends' converting reorders did.
#pragma once
#include <cstddef>
#include <cstdint>

#include "crest/core/bf16.hpp"
#include "crest/core/dtype.hpp"
#include "crest/core/fp16.hpp"

namespace crest {

// `to` must be DType::bf16 or DType::f16.
inline void floats_to_half_codes(const float* from, uint16_t* codes, size_t n, DType to) {
  if (to == DType::bf16)
    for (size_t i = 0; i < n; ++i) codes[i] = float_to_bf16(from[i]);
  else
    for (size_t i = 0; i < n; ++i) codes[i] = float_to_fp16(from[i]);
}

}  // namespace crest
