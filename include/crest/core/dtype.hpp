// Element types a tensor can hold.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace crest {

enum class DType : uint8_t { f32, f64, bf16, f16, i16, i32, i64, u8 };

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::f64:
    case DType::i64:
      return 8;
    case DType::f32:
    case DType::i32:
      return 4;
    case DType::bf16:
    case DType::f16:
    case DType::i16:
      return 2;
    case DType::u8:
      return 1;
  }
  return 0;
}

// bf16 and f16: the 16-bit floats mixed precision stores and computes activations in.
constexpr bool is_half(DType t) { return t == DType::bf16 || t == DType::f16; }
constexpr bool is_floating(DType t) { return t == DType::f32 || t == DType::f64 || is_half(t); }
// The dtype of the parameters a kernel of activation dtype `t` reads and the gradients it writes:
// 16-bit activations keep float32 master weights (crest.precision, docs/precision.md).
constexpr DType master_dtype(DType t) { return is_half(t) ? DType::f32 : t; }

std::string dtype_name(DType t);
// Parses "f32", "float32", "bf16", ...; throws crest::Error (input) naming the text otherwise.
DType parse_dtype(const std::string& name);

template <typename T>
struct dtype_of;
template <>
struct dtype_of<float> {
  static constexpr DType value = DType::f32;
};
template <>
struct dtype_of<double> {
  static constexpr DType value = DType::f64;
};
template <>
struct dtype_of<int16_t> {
  static constexpr DType value = DType::i16;
};
template <>
struct dtype_of<int32_t> {
  static constexpr DType value = DType::i32;
};
template <>
struct dtype_of<int64_t> {
  static constexpr DType value = DType::i64;
};
template <>
struct dtype_of<uint8_t> {
  static constexpr DType value = DType::u8;
};

}  // namespace crest
