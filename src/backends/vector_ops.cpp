// The VectorOps base: the compositions a backend may replace with a fused loop.
#include "crest/backends/kernels.hpp"

namespace crest {

VectorOps::SquareSums VectorOps::lamb_direction_with_norms(const void* w, void* g, void* m, void* v,
                                                           size_t count, double grad_divisor,
                                                           double beta1, double beta2, double eps,
                                                           double weight_decay, int64_t step) {
  lamb_direction(w, g, m, v, count, grad_divisor, beta1, beta2, eps, weight_decay, step);
  return SquareSums{sum_squares(w, count), sum_squares(g, count)};
}

}  // namespace crest
