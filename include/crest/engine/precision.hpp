// The precision a run computes in, and the dtypes it means for a compiled executor.
#pragma once
#include <optional>

#include "crest/core/dtype.hpp"
#include "crest/core/enum_table.hpp"

namespace crest {

// The dtype a run computes in. float64 is the oracle mode: the reference backend in double, what
// parity checks against float64 PyTorch compare with. bf16 and fp16 are mixed precision: 16-bit
// activations over float32 master weights (docs/precision.md).
enum class Precision { float32, float64, bf16, fp16 };
template <>
inline constexpr EnumEntries<Precision, 4> kEnumTable<Precision> = {
    {{Precision::float32, "float32"},
     {Precision::float64, "float64"},
     {Precision::bf16, "bf16"},
     {Precision::fp16, "fp16"}}};
// The dtype of the parameters, optimizer state and losses (CompileOptions::dtype).
DType precision_dtype(Precision p);
// The 16-bit dtype of mixed precision (CompileOptions::half), or none.
std::optional<DType> precision_half(Precision p);

}  // namespace crest
