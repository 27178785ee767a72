// Batch normalisation over [N, C, spatial...] with 1, 2 or 3 spatial dimensions: PyTorch's
// nn.BatchNorm1d/2d/3d, with the same parameter names and running-statistics update
// (crest/backends/batch_norm_kernel.hpp states the formulas). Training forwards normalise with
// the batch's statistics and update the running ones; evaluation forwards use the running ones.
// A ReLU reading only its output is fused into it by the compile step; with a BatchStatReducer
// on the executor it is synchronised batch norm (SyncBatchNorm).
#pragma once
#include <memory>

#include "crest/backends/batch_norm_kernel.hpp"
#include "crest/graph/layer_registry.hpp"

namespace crest {

struct BatchNormOptions {
  double momentum = 0.1;  // running = (1 - momentum) running + momentum batch
  double eps = 1e-5;      // added to the variance
};

class BatchNormLayer : public Layer {
 public:
  explicit BatchNormLayer(BatchNormOptions o);
  std::string kind() const override { return "batch_norm"; }
  bool computes_in_half() const override { return true; }
  // Under a spatial split: on the blocks, the statistics summed over the group's ranks.
  SpatialRole spatial_role() const override { return SpatialRole::group_statistics; }
  // The ReLU every BatchNormKernel applies (batch_norm_fuses()).
  bool accepts_post_op(const Backend& /*backend*/, const EltwiseDesc& e) const override {
    return batch_norm_fuses(e);
  }
  std::vector<Shape> infer_shapes(const std::vector<Shape>& in) const override;
  // weight [C] (ones), bias [C] (zeros), then the non-trained state running_mean [C] (zeros),
  // running_var [C] (ones), num_batches_tracked [1] (zeros): PyTorch's state_dict order.
  std::vector<ParamSpec> param_specs(const std::vector<Shape>& in) const override;
  BackwardNeeds backward_needs(size_t n_in, size_t n_out) const override;
  bool backward_applies_post_op() const override {
    return kernel_ && kernel_->backward_applies_post_op();
  }
  // On running statistics: scale = weight / sqrt(running_var + eps), shift = bias - running_mean
  // * scale (what every kernel's forward_inference computes, in double here).
  bool inference_is_channel_affine() const override { return true; }
  void inference_scale_shift(const std::vector<void*>& params, DType dtype,
                             std::vector<double>& scale, std::vector<double>& shift) const override;
  void create(CreateContext& ctx) override;
  void forward(RunContext& ctx) override;
  void backward(RunContext& ctx) override;
  Flops flops(const std::vector<Shape>& in, const std::vector<Shape>& out) const override;
  std::string describe() const override;

 private:
  static BatchNormParams params(const RunContext& ctx);
  BatchNormOptions opts_;
  EltwiseDesc post_op_;
  std::unique_ptr<BatchNormKernel> kernel_;
  bool need_input_grad_ = false;
};

namespace layers {
// A node of kind "batch_norm" (attributes momentum, eps).
LayerSpec batch_norm(const BatchNormOptions& o = {});
}  // namespace layers

}  // namespace crest
