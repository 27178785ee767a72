// One rank's part of a spatially split convolution or pooling layer: the backend's own kernel run
// on the rank's input window (owned rows plus halo, HaloExchange), producing the output rows the
// rank owns. Tensors given and returned are the rank's owned parts, plain layout
// ([n, c, spatial...]); where the backend's kernel prefers another format the part reorders.
//
// Forward gathers the window and keeps it: backward_weights reads it (the weight gradient needs
// the input rows the halo brought). backward_data returns the window's gradient to its owners.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "crest/backends/kernels.hpp"
#include "crest/dist/communicator.hpp"
#include "crest/graph/window_axis.hpp"
#include "crest/spatial/decomposition.hpp"
#include "crest/spatial/halo_exchange.hpp"

namespace crest {

// Where a split layer runs: the spatial group (ranks numbered as `grid`) and the layer's name
// for messages.
struct SpatialPlacement {
  Communicator* group = nullptr;
  SpatialGrid grid;
  std::string layer;
};

// "depth", "height", "width" for 3-D data, the last two for 2-D, "width" for 1-D.
std::string spatial_axis_name(int spatial_rank, int axis);

// The plans of this rank (the group's grid coordinates) along each axis; refuses a split the
// layer cannot take (plan_axis).
std::vector<AxisPlan> plan_window(const std::vector<WindowAxis>& axes,
                                  const SpatialPlacement& where);

// A tensor in the kernel's format and in plain layout, with the reorders between them (none when
// the kernel works in plain layout).
class FormatBridge {
 public:
  FormatBridge(Backend& backend, const MemFormat& kernel_format);
  // Plain data in the kernel's format (the same pointer when no reorder is needed).
  const void* to_kernel(const void* plain);
  // Where the kernel writes; then to_plain copies it out.
  void* kernel_buffer(void* plain);
  void to_plain(void* plain);

 private:
  std::unique_ptr<ReorderKernel> in_, out_;
  Buffer buf_;
};

class SpatialConv {
 public:
  // `global`: the whole convolution (the sample's extents). Transposed convolutions are refused.
  SpatialConv(Backend& backend, const ConvDesc& global, SpatialPlacement where);

  const ConvDesc& local() const { return local_; }
  const SpatialPlacement& placement() const { return where_; }
  std::string implementation() const { return kernel_->implementation(); }
  std::vector<int64_t> owned_src_dims() const { return halo_->owned_dims(); }
  std::vector<int64_t> owned_dst_dims() const;

  void forward(const void* src, const void* weights, const void* bias, void* dst);
  void backward_data(const void* diff_dst, const void* weights, void* diff_src);
  // This rank's share of the weight (and bias) gradient, from the last forward's window: their
  // sum over the group is the whole sample's gradient.
  void backward_weights(const void* diff_dst, void* diff_weights, void* diff_bias);

 private:
  SpatialPlacement where_;
  ConvDesc local_;
  std::unique_ptr<ConvKernel> kernel_;
  std::unique_ptr<HaloExchange> halo_;
  Buffer window_, window_grad_;
  std::unique_ptr<FormatBridge> src_, dst_, diff_dst_, diff_src_;
  Buffer scratch_;
};

class SpatialPool {
 public:
  SpatialPool(Backend& backend, const PoolDesc& global, SpatialPlacement where);

  const PoolDesc& local() const { return local_; }
  std::vector<int64_t> owned_src_dims() const { return halo_->owned_dims(); }
  std::vector<int64_t> owned_dst_dims() const;

  void forward(const void* src, void* dst);
  void backward(const void* diff_dst, void* diff_src);

 private:
  SpatialPlacement where_;
  PoolDesc local_;
  std::unique_ptr<PoolKernel> kernel_;
  std::unique_ptr<HaloExchange> halo_;
  Buffer window_, window_grad_;
  std::unique_ptr<FormatBridge> src_, dst_, diff_dst_, diff_src_;
  Buffer workspace_, scratch_;
};

}  // namespace crest
