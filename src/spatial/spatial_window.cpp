// SpatialConv and SpatialPool (spatial_window.hpp): the global descriptor cut down to this rank's
// window, the backend's kernel on it, and the halo exchange around it.
#include "crest/spatial/spatial_window.hpp"

#include <algorithm>

#include "crest/core/error.hpp"

namespace crest {
namespace {

// The descriptor's extents and padding cut down to this rank's plans.
template <typename Desc>
void localise(Desc& d, const std::vector<AxisPlan>& plans) {
  for (size_t i = 0; i < plans.size(); ++i) {
    d.in_size[i] = plans[i].window.size();
    d.out_size[i] = plans[i].owned_out.size();
    d.pad_lo[i] = plans[i].pad_lo;
    d.pad_hi[i] = plans[i].pad_hi;
  }
}

// [n, channels, owned input rows per axis].
std::unique_ptr<HaloExchange> make_halo(const SpatialPlacement& where,
                                        const std::vector<AxisPlan>& plans, int64_t n,
                                        int64_t channels, DType dtype) {
  std::vector<int64_t> dims{n, channels};
  std::vector<HaloExchange::Axis> axes;
  for (size_t i = 0; i < plans.size(); ++i) {
    dims.push_back(plans[i].owned_in.size());
    axes.push_back({static_cast<int>(i) + 2, plans[i]});
  }
  return std::make_unique<HaloExchange>(*where.group, where.grid, std::move(dims), std::move(axes),
                                        dtype, "layer '" + where.layer + "'");
}

std::vector<int64_t> dims_of(int64_t n, int64_t channels, const std::array<int64_t, 3>& size,
                             int spatial_rank) {
  std::vector<int64_t> dims{n, channels};
  for (size_t i = 0; i < static_cast<size_t>(spatial_rank); ++i) dims.push_back(size[i]);
  return dims;
}

// Kernel scratch and windows: never empty, so data() is a valid pointer.
Buffer scratch_for(size_t bytes) { return Buffer(std::max<size_t>(bytes, 64)); }

}  // namespace

std::string spatial_axis_name(int spatial_rank, int axis) {
  static const char* const names[] = {"depth", "height", "width"};
  return names[3 - spatial_rank + axis];
}

std::vector<AxisPlan> plan_window(const std::vector<WindowAxis>& axes,
                                  const SpatialPlacement& where) {
  if (where.grid.parts.size() != axes.size())
    throw_usage("dist.spatial: " + std::to_string(where.grid.parts.size()) +
                " parts given for layer '" + where.layer + "', which has " +
                std::to_string(axes.size()) + " spatial axes");
  const std::vector<int> coords = where.grid.coords(where.group->rank());
  std::vector<AxisPlan> plans;
  for (size_t i = 0; i < axes.size(); ++i)
    plans.push_back(
        plan_axis(axes[i], where.grid.parts[i], coords[i], where.layer,
                  spatial_axis_name(static_cast<int>(axes.size()), static_cast<int>(i))));
  return plans;
}

FormatBridge::FormatBridge(Backend& backend, const MemFormat& kernel_format) {
  const MemFormat plain = plain_format(kernel_format.shape, kernel_format.dtype);
  if (kernel_format == plain) return;
  in_ = backend.reorder(plain, kernel_format);
  out_ = backend.reorder(kernel_format, plain);
  buf_ = Buffer(std::max<size_t>(kernel_format.bytes, 64));
}

const void* FormatBridge::to_kernel(const void* plain) {
  if (!in_) return plain;
  in_->execute(plain, buf_.data());
  return buf_.data();
}

void* FormatBridge::kernel_buffer(void* plain) { return in_ ? buf_.data() : plain; }

void FormatBridge::to_plain(void* plain) {
  if (out_) out_->execute(buf_.data(), plain);
}

// --- SpatialConv ---------------------------------------------------------------------------

SpatialConv::SpatialConv(Backend& backend, const ConvDesc& global, SpatialPlacement where)
    : where_(std::move(where)), local_(global) {
  if (global.transposed)
    throw_usage("dist.spatial: layer '" + where_.layer +
                "' is a transposed convolution, which cannot be split spatially yet");
  const std::vector<AxisPlan> plans = plan_window(window_axes(global), where_);
  localise(local_, plans);
  halo_ = make_halo(where_, plans, global.n, global.in_channels, global.dtype);
  window_ = scratch_for(halo_->window_bytes());
  window_grad_ = scratch_for(halo_->window_bytes());
  const Shape src_shape(halo_->window_dims());
  kernel_ = backend.conv(local_, plain_format(src_shape, local_.dtype));
  src_ = std::make_unique<FormatBridge>(backend, kernel_->src_format());
  diff_src_ = std::make_unique<FormatBridge>(backend, kernel_->src_format());
  dst_ = std::make_unique<FormatBridge>(backend, kernel_->dst_format());
  diff_dst_ = std::make_unique<FormatBridge>(backend, kernel_->dst_format());
  scratch_ = scratch_for(kernel_->scratch_bytes());
}

std::vector<int64_t> SpatialConv::owned_dst_dims() const {
  return dims_of(local_.n, local_.out_channels, local_.out_size, local_.spatial_rank);
}

void SpatialConv::forward(const void* src, const void* weights, const void* bias, void* dst) {
  halo_->gather(src, window_.data());
  kernel_->forward(src_->to_kernel(window_.data()), weights, bias, dst_->kernel_buffer(dst),
                   scratch_.data());
  dst_->to_plain(dst);
}

void SpatialConv::backward_data(const void* diff_dst, const void* weights, void* diff_src) {
  kernel_->backward_data(diff_dst_->to_kernel(diff_dst), weights,
                         diff_src_->kernel_buffer(window_grad_.data()), scratch_.data());
  diff_src_->to_plain(window_grad_.data());
  halo_->scatter_add(window_grad_.data(), diff_src);
}

void SpatialConv::backward_weights(const void* diff_dst, void* diff_weights, void* diff_bias) {
  kernel_->backward_weights(src_->to_kernel(window_.data()), diff_dst_->to_kernel(diff_dst),
                            diff_weights, diff_bias, scratch_.data());
}

// --- SpatialPool ---------------------------------------------------------------------------

SpatialPool::SpatialPool(Backend& backend, const PoolDesc& global, SpatialPlacement where)
    : where_(std::move(where)), local_(global) {
  const std::vector<AxisPlan> plans = plan_window(window_axes(global), where_);
  localise(local_, plans);
  halo_ = make_halo(where_, plans, global.n, global.channels, global.dtype);
  window_ = scratch_for(halo_->window_bytes());
  window_grad_ = scratch_for(halo_->window_bytes());
  kernel_ = backend.pool(local_, plain_format(Shape(halo_->window_dims()), local_.dtype));
  src_ = std::make_unique<FormatBridge>(backend, kernel_->src_format());
  diff_src_ = std::make_unique<FormatBridge>(backend, kernel_->src_format());
  dst_ = std::make_unique<FormatBridge>(backend, kernel_->dst_format());
  diff_dst_ = std::make_unique<FormatBridge>(backend, kernel_->dst_format());
  workspace_ = scratch_for(kernel_->workspace_bytes());
  scratch_ = scratch_for(kernel_->scratch_bytes());
}

std::vector<int64_t> SpatialPool::owned_dst_dims() const {
  return dims_of(local_.n, local_.channels, local_.out_size, local_.spatial_rank);
}

void SpatialPool::forward(const void* src, void* dst) {
  halo_->gather(src, window_.data());
  kernel_->forward(src_->to_kernel(window_.data()), dst_->kernel_buffer(dst), workspace_.data(),
                   scratch_.data());
  dst_->to_plain(dst);
}

void SpatialPool::backward(const void* diff_dst, void* diff_src) {
  kernel_->backward(diff_dst_->to_kernel(diff_dst), workspace_.data(),
                    diff_src_->kernel_buffer(window_grad_.data()), scratch_.data());
  diff_src_->to_plain(window_grad_.data());
  halo_->scatter_add(window_grad_.data(), diff_src);
}

}  // namespace crest
