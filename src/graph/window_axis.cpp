// window_axes (window_axis.hpp): the descriptors' windows, axis by axis.
#include "crest/graph/window_axis.hpp"

namespace crest {
namespace {

template <typename Desc>
std::vector<WindowAxis> axes_of(const Desc& d, const std::array<int64_t, 3>& dilation,
                                bool transposed = false) {
  std::vector<WindowAxis> axes;
  for (size_t i = 0; i < static_cast<size_t>(d.spatial_rank); ++i)
    axes.push_back({.in_extent = d.in_size[i],
                    .out_extent = d.out_size[i],
                    .kernel = d.kernel[i],
                    .stride = d.stride[i],
                    .dilation = dilation[i],
                    .pad_lo = d.pad_lo[i],
                    .transposed = transposed});
  return axes;
}

}  // namespace

WindowAxis reversed(const WindowAxis& w) {
  WindowAxis r = w;
  r.in_extent = w.out_extent;
  r.out_extent = w.in_extent;
  r.transposed = !w.transposed;
  return r;
}

std::vector<WindowAxis> window_axes(const ConvDesc& d) {
  return axes_of(d, d.dilation, d.transposed);
}
std::vector<WindowAxis> window_axes(const PoolDesc& d) { return axes_of(d, {1, 1, 1}); }

}  // namespace crest
