#include "onednn/lane_addressing.hpp"

#include "onednn/format.hpp"
#include "onednn/onednn_backend.hpp"

namespace crest::onednn {

namespace {

// A volume's depth folds into its rows: voxel (z, y, x) is pixel (z * height + y, x).
int64_t rows(const Shape& shape) {
  int64_t r = 1;
  for (int a = 2; a + 1 < shape.rank(); ++a) r *= shape[a];
  return r;
}

}  // namespace

LaneLayout lane_layout(const Shape& shape, DType dtype) {
  const dnnl::memory::desc blocked = blocked_activation_desc(to_dims(shape), to_dnnl(dtype));
  // A channel count that is not a multiple of 16 would pad the blocks; channels-last holds only
  // real channels, and the loops read and write its short last block lane by lane. oneDNN's AMX
  // kernels keep bf16 activations channels-last (every convolution and pooling of CosmoFlow does
  // there), so the loops take that layout too.
  const bool amx_channels_last = dtype == DType::bf16 && amx_bf16_kernels();
  const bool by16 = blocked.get_inner_blks() == dnnl::memory::dims{lanes::kLanes} &&
                    shape[1] % lanes::kLanes == 0 && !amx_channels_last;
  return {by16 ? to_mem_format(blocked, dtype) : plain_format(shape, dtype, Layout::channels_last),
          addressing(by16, shape[1], rows(shape), shape[shape.rank() - 1])};
}

}  // namespace crest::onednn
