// Per-channel affine map y[n, c, ...] = scale[c] * x[n, c, ...] + shift[c], with trainable scale
// (initialised to 1) and shift (0): a batch norm's affine part on its own, as DeepLabv3+'s
// image-pooling branch applies after its 1x1 convolution.
#pragma once
#include <memory>

#include "crest/graph/layer_registry.hpp"

namespace crest {

struct ChannelAffineDesc {
  int64_t n = 1, channels = 1, spatial = 1;  // plain [n, channels, spatial] memory
  bool shift = true;
  DType dtype = DType::f32;
};

// Registered per backend (CREST_REGISTER_KERNEL); backends without one run the reference's.
class ChannelAffineKernel {
 public:
  using Desc = ChannelAffineDesc;
  static constexpr const char* kName = "channel_affine";
  virtual ~ChannelAffineKernel() = default;
  virtual void forward(const void* src, const void* scale, const void* shift, void* dst) = 0;
  virtual void backward_data(const void* diff_dst, const void* scale, void* diff_src) = 0;
  // Overwrites diff_scale and diff_shift (null without a shift).
  virtual void backward_weights(const void* src, const void* diff_dst, void* diff_scale,
                                void* diff_shift) = 0;
};

struct ChannelAffineOptions {
  bool shift = true;
};

class ChannelAffineLayer : public Layer {
 public:
  explicit ChannelAffineLayer(ChannelAffineOptions o) : opts_(o) {}
  std::string kind() const override { return "channel_affine"; }
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
