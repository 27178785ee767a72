#include "crest/engine/precision.hpp"

namespace crest {

DType precision_dtype(Precision p) { return p == Precision::float64 ? DType::f64 : DType::f32; }

std::optional<DType> precision_half(Precision p) {
  if (p == Precision::bf16) return DType::bf16;
  if (p == Precision::fp16) return DType::f16;
  return std::nullopt;
}

}  // namespace crest
