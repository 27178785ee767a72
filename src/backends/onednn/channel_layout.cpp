#include "onednn/channel_layout.hpp"

#include "crest/core/error.hpp"

namespace crest::onednn {

bool ChannelLayout::supports(const dnnl::memory::desc& md) {
  using dt = dnnl::memory::data_type;
  const dt t = md.get_data_type();
  if (md.get_format_kind() != dnnl::memory::format_kind::blocked ||
      (t != dt::f32 && t != dt::bf16 && t != dt::f16) || md.get_submemory_offset() != 0)
    return false;
  if (md.get_ndims() < 3 || md.get_ndims() > 5) return false;
  const dnnl::memory::dims idxs = md.get_inner_idxs();
  return idxs.empty() || (idxs.size() == 1 && idxs[0] == 1);
}

ChannelLayout::ChannelLayout(const dnnl::memory::desc& md) {
  CREST_CHECK(supports(md), "ChannelLayout: unsupported layout");
  const dnnl::memory::dims dims = md.get_dims(), strides = md.get_strides();
  const dnnl::memory::dims blks = md.get_inner_blks();
  dtype = md.get_data_type();
  n = dims[0];
  channels = dims[1];
  block = blks.size() == 1 ? blks[0] : 1;
  stride_n = strides[0];
  stride_block = strides[1];
  // Spatial dimensions right-aligned, as the reference kernels widen them.
  const size_t spatial = dims.size() - 2;
  for (size_t i = 0; i < spatial; ++i) {
    const size_t u = 3 - spatial + i;
    size[u] = dims[2 + i];
    stride[u] = strides[2 + i];
  }
}

}  // namespace crest::onednn
