// Element-wise activations (ReLU, LeakyReLU, tanh, sigmoid) and scale (y = a x + b).
// All compute their backward from their output, so they run in place and fuse into a preceding
// convolution as a post-op.
#pragma once
#include <memory>

#include "crest/graph/layer_registry.hpp"

namespace crest {

class ActivationLayer : public Layer {
 public:
  explicit ActivationLayer(EltwiseDesc e);
  static std::unique_ptr<ActivationLayer> relu() { return make(EltwiseKind::relu, 0.f); }
  static std::unique_ptr<ActivationLayer> leaky_relu(float slope) {
    return make(EltwiseKind::leaky_relu, slope);
  }
  static std::unique_ptr<ActivationLayer> tanh() { return make(EltwiseKind::tanh, 0.f); }
  static std::unique_ptr<ActivationLayer> sigmoid() { return make(EltwiseKind::sigmoid, 0.f); }
  static std::unique_ptr<ActivationLayer> scale(float a, float b = 0.f) {
    return std::make_unique<ActivationLayer>(EltwiseDesc{EltwiseKind::linear, a, b});
  }

  std::string kind() const override;
  bool computes_in_half() const override { return true; }
  SpatialRole spatial_role() const override { return SpatialRole::pointwise; }
  std::vector<Shape> infer_shapes(const std::vector<Shape>& in) const override;
  BackwardNeeds backward_needs(size_t n_in, size_t n_out) const override;
  std::optional<EltwiseDesc> activation() const override { return op_; }
  void create(CreateContext& ctx) override;
  void forward(RunContext& ctx) override;
  void backward(RunContext& ctx) override;
  std::string describe() const override;

 private:
  static std::unique_ptr<ActivationLayer> make(EltwiseKind k, float a) {
    return std::make_unique<ActivationLayer>(EltwiseDesc{k, a, 0.f});
  }
  EltwiseDesc op_;
  std::unique_ptr<EltwiseKernel> kernel_;
};

// Builder helpers: nodes of kind "relu", "leaky_relu", "tanh", "sigmoid" and "scale".
namespace layers {
LayerSpec relu();
LayerSpec leaky_relu(float negative_slope);
LayerSpec tanh();
LayerSpec sigmoid();
LayerSpec scale(float scale, float shift = 0.f);
}  // namespace layers

}  // namespace crest
