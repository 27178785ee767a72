#include "onednn/weight_grad_kernel.hpp"

#include <vector>

#include "crest/core/error.hpp"
#include "onednn/format.hpp"

namespace crest::onednn {

void WeightGradKernel::bias_grad(const void* /*diff_dst*/, float* /*diff_bias*/) {
  CREST_CHECK(false, name() + " computes no bias gradient");
}

bool activations_channels_last(const ConvDesc& d, const dnnl::memory::desc& src,
                               const dnnl::memory::desc& dst) {
  std::vector<int64_t> in{d.n, d.in_channels}, out{d.n, d.out_channels};
  for (int a = 0; a < d.spatial_rank; ++a) {
    in.push_back(d.in_size[static_cast<size_t>(a)]);
    out.push_back(d.out_size[static_cast<size_t>(a)]);
  }
  return src == layout_desc(Shape(in), d.dtype, Layout::channels_last) &&
         dst == layout_desc(Shape(out), d.dtype, Layout::channels_last);
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
