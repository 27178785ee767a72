// Summing a window of micro-batches' gradients, one parameter slot at a time as backward
// finishes it (src/engine, internal): TrainStep's gradient accumulation and a pipeline stage's
// micro-batches. Done per slot while the slot's gradient is still in cache, the sum costs no
// pass of its own over the whole store, and the last micro-batch's scale joins its add.
#pragma once
#include <cstddef>

#include "crest/backends/kernels.hpp"

namespace crest {

// Micro-batch `phase` (0-based) of a window of `window`: the first copies `grad` into `sum`,
// the middle ones add it to `sum`, the last writes (sum + grad) * last_scale into `dst` (which
// may be `grad`). A window of one writes grad * last_scale. Each addition and the multiply round
// as separate passes would, so the result does not depend on where the slots are summed; a
// last_scale of 1 (gradients already divided by the window, as a pipeline stage's are) costs no
// multiply.
void accumulate_gradient_slot(VectorOps& vec, int phase, int window, const void* grad, void* sum,
                              void* dst, size_t count, double last_scale);

}  // namespace crest
