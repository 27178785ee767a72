#include "gradient_accumulation.hpp"

namespace crest {

void accumulate_gradient_slot(VectorOps& vec, int phase, int window, const void* grad, void* sum,
                              void* dst, size_t count, double last_scale) {
  if (window == 1) {
    if (dst != grad || last_scale != 1.0) vec.scale(last_scale, grad, dst, count);
  } else if (phase == 0) {
    vec.copy(grad, sum, count);
  } else if (phase + 1 < window) {
    vec.add(sum, grad, sum, count);
  } else {
    vec.add(grad, sum, dst, count);
    if (last_scale != 1.0) vec.scale(last_scale, dst, dst, count);
  }
}

}  // namespace crest
