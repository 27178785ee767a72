// Per-channel affine map y[n, c, ...] = scale[c] * x[n, c, ...] + shift[c], with trainable scale
// (initialised to 1) and shift (0): a batch norm's affine part on its own, as DeepLabv3+'s
// image-pooling branch applies after its 1x1 convolution.
#pragma once
#include <memory>

#include "crest/backends/channel_affine_kernel.hpp"
#include "crest/graph/layer_registry.hpp"

namespace crest {

struct ChannelAffineOptions {
  bool shift = true;
};

class ChannelAffineLayer : public Layer {
 public:
  explicit ChannelAffineLayer(ChannelAffineOptions o) : opts_(o) {}
  std::string kind() const override { return "channel_affine"; }
  bool computes_in_half() const override { return true; }
  SpatialRole spatial_role() const override { return SpatialRole::pointwise; }
  std::vector<Shape> infer_shapes(const std::vector<Shape>& in) const override;
  std::vector<ParamSpec> param_specs(const std::vector<Shape>& in) const override;
  BackwardNeeds backward_needs(size_t n_in, size_t n_out) const override;
  void create(CreateContext& ctx) override;
  void forward(RunContext& ctx) override;
  void backward(RunContext& ctx) override;
  Flops flops(const std::vector<Shape>& in, const std::vector<Shape>& out) const override;

 private:
  ChannelAffineOptions opts_;
  std::unique_ptr<ChannelAffineKernel> kernel_;
  bool need_input_grad_ = false;
};

namespace layers {
LayerSpec channel_affine(bool shift = true);
}  // namespace layers

}  // namespace crest
