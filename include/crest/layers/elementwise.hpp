// Element-wise combinations of tensors and dropout.
#pragma once
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

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
// identity in inference. The mask comes from a counter-based hash of (step seed, the element's
// position in the tensor), so backward recomputes it instead of storing it. Positions count in
// plain [n, c, spatial...] order: a tensor with spatial axes is taken plain, so the mask does not
// depend on the layout a backend chose; on a spatially split tensor each rank draws its block's
// elements at their positions in the whole tensor, so the masks are the unsplit run's.
struct DropoutOptions {
  float p = 0.5f;  // the probability of dropping an element
};

class DropoutLayer : public Layer {
 public:
  explicit DropoutLayer(DropoutOptions o);
  std::string kind() const override { return "dropout"; }
  bool computes_in_half() const override { return true; }
  SpatialRole spatial_role() const override { return SpatialRole::positional; }
  std::vector<Shape> infer_shapes(const std::vector<Shape>& in) const override { return in; }
  BackwardNeeds backward_needs(size_t n_in, size_t n_out) const override;
  void create(CreateContext& ctx) override;
  void forward(RunContext& ctx) override;
  void backward(RunContext& ctx) override;
  std::string describe() const override;

 private:
  // A run of the tensor this rank holds that is contiguous in the whole tensor too: `count`
  // elements from `offset` (in the rank's tensor) are the whole tensor's from `first`.
  struct Run {
    size_t offset = 0;
    uint64_t first = 0;
    size_t count = 0;
  };
  static std::vector<Run> block_runs(const Shape& block, const Shape& whole,
                                     const std::vector<int64_t>& start);
  static std::vector<Run> feature_runs(const Shape& block, int64_t whole_features,
                                       const std::vector<std::pair<int64_t, int64_t>>& runs);
  void apply(VectorOps& vec, const void* x, void* dst, const VectorOps::DropoutSeed& seed) const;

  float p_;
  size_t count_ = 0;
  size_t element_bytes_ = 4;
  bool training_ = true;
  std::vector<Run> runs_;  // one run of every element, unless the tensor is a block
};

// Builder helpers: nodes of kind "add" and "dropout".
namespace layers {
LayerSpec add();
LayerSpec dropout(float p);
}  // namespace layers

}  // namespace crest
