// Dense (fully connected): y = x W^T + b with W [out, in] as PyTorch's Linear.
#pragma once
#include <memory>

#include "crest/graph/layer_registry.hpp"

namespace crest {

struct DenseOptions {
  int64_t out_features = 1;
  bool bias = true;
  Init init = Init::glorot_uniform;
  double l2 = 0.0;  // L2 penalty on the kernel
};

class DenseLayer : public Layer {
 public:
  explicit DenseLayer(DenseOptions o) : opts_(o) {}
  std::string kind() const override { return "dense"; }
  bool computes_in_half() const override { return true; }
  SpatialRole spatial_role() const override { return SpatialRole::feature_matrix; }
  std::vector<Shape> infer_shapes(const std::vector<Shape>& in) const override;
  std::vector<ParamSpec> param_specs(const std::vector<Shape>& in) const override;
  BackwardNeeds backward_needs(size_t n_in, size_t n_out) const override;
  void create(CreateContext& ctx) override;
  void forward(RunContext& ctx) override;
  void backward(RunContext& ctx) override;
  Flops flops(const std::vector<Shape>& in, const std::vector<Shape>& out) const override;
  std::string describe() const override;

 private:
  DenseOptions opts_;
  std::unique_ptr<DenseKernel> kernel_;
  bool need_input_grad_ = false;
};

// Builder helper: a node of kind "dense".
namespace layers {
LayerSpec dense(const DenseOptions& o);
}  // namespace layers

}  // namespace crest
