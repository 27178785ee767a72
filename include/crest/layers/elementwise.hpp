// Element-wise combinations of tensors and dropout.
#pragma once
#include <memory>

#include "crest/graph/layer_registry.hpp"

namespace crest {

// out = a + b (same shape; b is reordered to a's format when they differ).
class AddLayer : public Layer {
 public:
  std::string kind() const override { return "add"; }
  bool computes_in_half() const override { return true; }
  SpatialRole spatial_role() const override { return SpatialRole::pointwise; }
  std::vector<Shape> infer_shapes(const std::vector<Shape>& in) const override;
  void create(CreateContext& ctx) override;
  void forward(RunContext& ctx) override;
  void backward(RunContext& ctx) override;

 private:
  size_t count_ = 0;
};

// Inverted dropout: in training keep each element with probability 1 - p and scale by 1/(1-p);
// identity in inference. The mask comes from a counter-based hash of (step seed, index), so
// backward recomputes it instead of storing it.
struct DropoutOptions {
  float p = 0.5f;  // the probability of dropping an element
};

class DropoutLayer : public Layer {
 public:
  explicit DropoutLayer(DropoutOptions o);
  std::string kind() const override { return "dropout"; }
  bool computes_in_half() const override { return true; }
  // Masks are drawn by position in the tensor a rank holds, so a split tensor would get other
  // masks than the whole one: the compile gathers its input (split masks by global position are
  // future work).
  SpatialRole spatial_role() const override { return SpatialRole::whole; }
  std::vector<Shape> infer_shapes(const std::vector<Shape>& in) const override { return in; }
  BackwardNeeds backward_needs(size_t n_in, size_t n_out) const override;
  void create(CreateContext& ctx) override;
  void forward(RunContext& ctx) override;
  void backward(RunContext& ctx) override;
  std::string describe() const override;

 private:
  float p_;
  size_t count_ = 0;
  bool training_ = true;
};

// Builder helpers: nodes of kind "add" and "dropout".
namespace layers {
LayerSpec add();
LayerSpec dropout(float p);
}  // namespace layers

}  // namespace crest
