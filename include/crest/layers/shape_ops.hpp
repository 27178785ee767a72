// Layers that only move data: flatten (channels-last order, as the reference Keras models),
// concat along channels and expand_as (a broadcast over another tensor's spatial size). (The
// reorder the compiler inserts is private to src/graph/compile.)
#pragma once
#include <memory>

#include "crest/backends/expand_kernel.hpp"
#include "crest/graph/layer_registry.hpp"

namespace crest {

// [N, C, spatial...] -> [N, spatial... * C] in D,H,W,C order, so dense weights are compatible
// with channels-last frameworks (Keras/TensorFlow CosmoFlow). A view when the input is already
// channels-last; otherwise the compile step reorders into channels-last first.
class FlattenLayer : public Layer {
 public:
  std::string kind() const override { return "flatten"; }
  bool computes_in_half() const override { return true; }
  std::vector<Shape> infer_shapes(const std::vector<Shape>& in) const override;
  BackwardNeeds backward_needs(size_t n_in, size_t n_out) const override;
  void create(CreateContext& ctx) override;
  void forward(RunContext& ctx) override;
  void backward(RunContext& ctx) override;

 private:
  size_t bytes_ = 0;
};

class ConcatLayer : public Layer {
 public:
  std::string kind() const override { return "concat"; }
  bool computes_in_half() const override { return true; }
  SpatialRole spatial_role() const override { return SpatialRole::pointwise; }  // channels
  std::vector<Shape> infer_shapes(const std::vector<Shape>& in) const override;
  void create(CreateContext& ctx) override;
  void forward(RunContext& ctx) override;
  void backward(RunContext& ctx) override;

 private:
  std::unique_ptr<ConcatKernel> kernel_;
  std::vector<const void*> srcs_;
  std::vector<void*> diffs_;
};

// Two inputs: x [N, C, 1, ..., 1] and a reference [N, C', S...] of the same rank; the output
// [N, C, S...] repeats each x[n, c] over the reference's spatial size S (DeepLabv3+'s image-pool
// branch brought to the feature map's size, at any input size). Only the reference's shape is
// read: it gets no gradient and keeps its format. The gradient of x is the sum over S.
class ExpandAsLayer : public Layer {
 public:
  std::string kind() const override { return "expand_as"; }
  bool computes_in_half() const override { return true; }
  // x is broadcast over the reference's block (layer.hpp, SpatialRole).
  SpatialRole spatial_role() const override { return SpatialRole::pointwise; }
  std::vector<Shape> infer_shapes(const std::vector<Shape>& in) const override;
  bool input_is_constant(size_t i) const override { return i == 1; }
  void create(CreateContext& ctx) override;
  void forward(RunContext& ctx) override;
  void backward(RunContext& ctx) override;

 private:
  std::unique_ptr<ExpandKernel> kernel_;
};

// Builder helpers: nodes of kind "flatten", "concat" and "expand_as".
namespace layers {
LayerSpec flatten();
LayerSpec concat();
LayerSpec expand_as();
}  // namespace layers

}  // namespace crest
