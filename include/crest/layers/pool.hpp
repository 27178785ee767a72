// Max and average pooling, 1-D to 3-D, and global average pooling.
#pragma once
#include <memory>
#include <vector>

#include "crest/graph/layer_registry.hpp"

namespace crest {

struct PoolOptions {
  PoolKind kind = PoolKind::max;
  std::vector<int64_t> kernel{2, 2, 2};  // its length is the spatial rank
  std::vector<int64_t> stride;           // default = kernel
  std::vector<int64_t> padding;          // symmetric, default 0
  bool global = false;                   // kernel = the whole spatial extent (output 1 per dim)
};

class PoolLayer : public Layer {
 public:
  explicit PoolLayer(PoolOptions o) : opts_(std::move(o)) {}
  std::string kind() const override;
  bool computes_in_half() const override { return true; }
  bool selects_window_maximum() const override {
    return !opts_.global && opts_.kind == PoolKind::max;
  }
  SpatialRole spatial_role() const override {
    return opts_.global ? SpatialRole::spatial_mean : SpatialRole::windowed;
  }
  std::vector<WindowAxis> window_axes(const Shape& in, const Shape& out) const override {
    return crest::window_axes(make_desc(in, out, DType::f32));
  }
  std::vector<Shape> infer_shapes(const std::vector<Shape>& in) const override;
  void create(CreateContext& ctx) override;
  void forward(RunContext& ctx) override;
  void backward(RunContext& ctx) override;
  Flops flops(const std::vector<Shape>& in, const std::vector<Shape>& out) const override;
  std::string describe() const override;

 private:
  PoolDesc make_desc(const Shape& in, const Shape& out, DType dtype) const;
  PoolOptions opts_;
  std::unique_ptr<PoolKernel> kernel_;
};

// Builder helper: a node of kind "max_pool", "avg_pool" or "global_avg_pool" as `o` says.
namespace layers {
LayerSpec pool(const PoolOptions& o);
}  // namespace layers

}  // namespace crest
