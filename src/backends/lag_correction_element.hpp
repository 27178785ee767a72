// One element of the gradient lag's local correction (VectorOps::lag_correction), written once for
// every backend's loop: the reference's, the onednn clones' and the CUDA kernel's, so that all
// round alike (every product and difference in double, each result rounded to T).
#pragma once
#include <cstddef>

// Inlined into each caller, so the onednn clones vectorise it at their own instruction set.
#if defined(__CUDACC__)
#define CREST_ELEMENT_FUNCTION __host__ __device__ __forceinline__
#else
#define CREST_ELEMENT_FUNCTION [[gnu::always_inline]] inline
#endif

namespace crest {

template <typename T>
CREST_ELEMENT_FUNCTION void lag_correct_element(T* grads, const T* average, T* own_previous,
                                                T* sent, size_t i, double own_scale,
                                                bool replace_share) {
  const T own = grads[i];
  const T scaled = static_cast<T>(own_scale * static_cast<double>(own));
  const T stale =
      static_cast<T>(static_cast<double>(own_previous[i]) - static_cast<double>(average[i]));
  sent[i] = own;
  grads[i] = replace_share
                 ? static_cast<T>(static_cast<double>(scaled) - static_cast<double>(stale))
                 : scaled;
  own_previous[i] = scaled;
}

}  // namespace crest
