// Layers that only move data: flatten (channels-last order, as the reference Keras models) and
// concat along channels. (The reorder the compiler inserts is private to src/graph/compile.)
#pragma once
#include <memory>

#include "crest/graph/layer_registry.hpp"

namespace crest {

// [N, C, spatial...] -> [N, spatial... * C] in D,H,W,C order, so dense weights are compatible
// with channels-last frameworks (Keras/TensorFlow CosmoFlow). A view when the input is already
// channels-last; otherwise the compile step reorders into channels-last first.
class FlattenLayer : public Layer {
 public:
  std::string kind() const override { return "flatten"; }
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
  std::vector<Shape> infer_shapes(const std::vector<Shape>& in) const override;
  void create(CreateContext& ctx) override;
  void forward(RunContext& ctx) override;
  void backward(RunContext& ctx) override;

 private:
  std::unique_ptr<ConcatKernel> kernel_;
  std::vector<const void*> srcs_;
  std::vector<void*> diffs_;
};

// Builder helpers: nodes of kind "flatten" and "concat".
namespace layers {
LayerSpec flatten();
LayerSpec concat();
}  // namespace layers

}  // namespace crest
