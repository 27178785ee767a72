// Loss layers: each takes the prediction and a constant target, produces a scalar [1] output
// and starts backward.
#pragma once
#include <vector>

#include "crest/graph/layer_registry.hpp"

namespace crest {

// Mean squared error over all elements (Keras 'mse' with equal-length targets).
class MseLossLayer : public Layer {
 public:
  std::string kind() const override { return "mse_loss"; }
  bool computes_in_half() const override { return false; }
  std::vector<Shape> infer_shapes(const std::vector<Shape>& in) const override;
  BackwardNeeds backward_needs(size_t n_in, size_t n_out) const override;
  bool is_loss() const override { return true; }
  bool input_is_constant(size_t i) const override { return i == 1; }
  SpatialRole spatial_role() const override { return SpatialRole::position_mean; }
  void create(CreateContext& ctx) override;
  void forward(RunContext& ctx) override;
  void backward(RunContext& ctx) override;

 private:
  size_t count_ = 0;
};

// Softmax cross-entropy over channel 1 of [N, C, spatial...] logits with int32 labels
// [N, spatial...], either per-class weights — plain mean over N x spatial of w[label] *
// -log p[label] (the DeepCAM reference: not divided by the sum of weights) — or label smoothing
// e — the mean of sum_c q_c * -log p[c] with q = (1 - e) onehot(label) + e / C, PyTorch's
// cross_entropy(label_smoothing=e) (the ResNet-50 recipes' 0.1). Not both: PyTorch weights a
// smoothed loss per class and divides by the weights' sum, which is neither reference's rule.
// `scale` multiplies the loss and so its gradient (the Gordon Bell Tiramisu's --scale_factor).
struct SoftmaxCrossEntropyOptions {
  std::vector<float> class_weights;  // empty: 1 for every class
  double label_smoothing = 0;        // in [0, 1)
  double scale = 1;                  // > 0
};

class SoftmaxCrossEntropyLayer : public Layer {
 public:
  explicit SoftmaxCrossEntropyLayer(SoftmaxCrossEntropyOptions o);
  std::string kind() const override { return "softmax_cross_entropy"; }
  bool computes_in_half() const override { return false; }
  std::vector<Shape> infer_shapes(const std::vector<Shape>& in) const override;
  BackwardNeeds backward_needs(size_t n_in, size_t n_out) const override;
  bool is_loss() const override { return true; }
  bool reads_logits() const override { return true; }
  bool input_is_constant(size_t i) const override { return i == 1; }
  SpatialRole spatial_role() const override { return SpatialRole::position_mean; }
  void create(CreateContext& ctx) override;
  void forward(RunContext& ctx) override;
  void backward(RunContext& ctx) override;
  // The scaled loss; a label out of range that the pass found is named here.
  double loss_from(const double* written) const override;

 private:
  std::vector<float> weights_;
  double label_smoothing_ = 0, scale_ = 1;
  const float* class_weights() const {
    return static_cast<const float*>(weights_on_backend_.data());
  }
  Buffer weights_on_backend_;  // weights_ where the kernel runs: the backend's memory
  MemoryResource* memory_ = nullptr;
  const int32_t* labels_ = nullptr;  // the last forward's, for loss_from's message
  int64_t n_ = 0, classes_ = 0, spatial_ = 0;
};

// A pipeline stage's end (crest/graph/pipeline_cut.hpp): inputs (x_1, g_1, x_2, g_2, ...) with
// g_i the gradient of the whole network's loss with respect to x_i, received from the next stage.
// Its backward gives each x_i exactly g_i (under loss scaling g_i already carries the scale the
// last stage seeded), so the stage's backward is the whole network's; its loss is 0 (the next
// stages compute the loss).
class UpstreamGradientLayer : public Layer {
 public:
  std::string kind() const override { return "upstream_gradient"; }
  bool computes_in_half() const override { return false; }
  std::vector<Shape> infer_shapes(const std::vector<Shape>& in) const override;
  BackwardNeeds backward_needs(size_t n_in, size_t n_out) const override;
  bool is_loss() const override { return true; }
  bool input_is_constant(size_t i) const override { return i % 2 == 1; }
  void create(CreateContext& ctx) override;
  void forward(RunContext& ctx) override;
  void backward(RunContext& ctx) override;
  double loss_from(const double*) const override { return 0; }

 private:
  std::vector<size_t> counts_;  // elements of each x_i
};

// Builder helpers: nodes of kind "mse_loss" and "softmax_cross_entropy".
namespace layers {
LayerSpec mse_loss();
LayerSpec softmax_cross_entropy(std::vector<float> class_weights = {});
LayerSpec softmax_cross_entropy(const SoftmaxCrossEntropyOptions& o);
}  // namespace layers

}  // namespace crest
