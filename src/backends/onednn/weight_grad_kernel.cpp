#include "onednn/weight_grad_kernel.hpp"

#include "onednn/format.hpp"

namespace crest::onednn {

bool activations_channels_last(const ConvDesc& d, const dnnl::memory::desc& src,
                               const dnnl::memory::desc& dst) {
  const Shape in{d.n, d.in_channels, d.in_size[0], d.in_size[1]};
  const Shape out{d.n, d.out_channels, d.out_size[0], d.out_size[1]};
  return src == layout_desc(in, d.dtype, Layout::channels_last) &&
         dst == layout_desc(out, d.dtype, Layout::channels_last);
}

void interleave_taps(const float* per_tap, int64_t taps, int64_t rows, int64_t cols, float* out) {
  const auto slice = static_cast<size_t>(rows * cols);
#pragma omp parallel for schedule(static) if (rows * cols * taps >= (1 << 16))
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      for (int64_t k = 0; k < taps; ++k)
        out[(r * cols + c) * taps + k] =
            per_tap[static_cast<size_t>(k) * slice + static_cast<size_t>(r * cols + c)];
}

}  // namespace crest::onednn
