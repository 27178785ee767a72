// oneDNN's blocked activation layouts of both widths (nChw16c as AVX-512 dispatch picks, nChw8c
// as AVX2 picks), built directly: tests of kernels that read blocked layouts cover both on every
// machine instead of only the width this CPU's convolutions happen to choose.
#pragma once
#include <oneapi/dnnl/dnnl.hpp>

#include "crest/core/error.hpp"
#include "onednn/format.hpp"

namespace crest::testing {

constexpr int64_t kBlockWidths[] = {8, 16};

// `shape` [N, C, spatial...] (1 to 3 spatial dimensions) of `dtype`, channels in blocks of `block`.
inline MemFormat onednn_blocked_format(const Shape& shape, int64_t block,
                                       DType dtype = DType::f32) {
  using tag = dnnl::memory::format_tag;
  CREST_CHECK(block == 8 || block == 16, "block widths are 8 or 16");
  const bool wide = block == 16;
  tag t = tag::undef;
  switch (shape.rank()) {
    case 3:
      t = wide ? tag::aBc16b : tag::aBc8b;
      break;
    case 4:
      t = wide ? tag::aBcd16b : tag::aBcd8b;
      break;
    case 5:
      t = wide ? tag::aBcde16b : tag::aBcde8b;
      break;
    default:
      CREST_CHECK(false, "blocked layouts have 1 to 3 spatial dimensions");
  }
  const dnnl::memory::desc d(onednn::to_dims(shape), onednn::to_dnnl(dtype), t);
  return onednn::to_mem_format(d, dtype);
}

}  // namespace crest::testing
