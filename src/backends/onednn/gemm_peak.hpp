// The machine's GEMM rate through oneDNN: the roofline reference of `crest bench peak`.
#pragma once
#include <string>

#include "crest/core/dtype.hpp"

namespace crest {

struct GemmPeak {
  bool supported = false;  // false when the CPU has no fast path for the dtype
  double gflops = 0;       // best of the timed runs
  std::string implementation;
};

// Times an m x n x k matmul (C = A B) `iters` times after one warm-up and returns the best rate.
// bf16 and f16 run with 16-bit inputs and f32 accumulation/output.
GemmPeak measure_gemm_peak(DType dtype, int64_t m, int64_t n, int64_t k, int iters);

}  // namespace crest
