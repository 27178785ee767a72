#include "onednn/lane_addressing.hpp"

#include "onednn/format.hpp"

namespace crest::onednn {

LaneLayout lane_layout(const Shape& shape, DType dtype) {
  const dnnl::memory::desc blocked = blocked_activation_desc(to_dims(shape), to_dnnl(dtype));
  const bool by16 = blocked.get_inner_blks() == dnnl::memory::dims{lanes::kLanes};
  return {by16 ? to_mem_format(blocked, dtype) : plain_format(shape, dtype, Layout::channels_last),
          addressing(by16, shape[1], shape[2], shape[3])};
}

}  // namespace crest::onednn
