// Convolution and transposed convolution, 1-D, 2-D and 3-D.
#pragma once
#include <memory>
#include <vector>

#include "crest/graph/layer_registry.hpp"

namespace crest {

struct ConvOptions {
  int64_t out_channels = 1;
  std::vector<int64_t> kernel{3, 3, 3};  // its length is the spatial rank
  std::vector<int64_t> stride;           // default 1 per dim
  std::vector<int64_t> dilation;         // default 1 per dim (1 = dense)
  // Explicit padding per dim (symmetric), or `same` as Keras/TensorFlow: output = ceil(in/stride),
  // the odd pixel of padding going to the end.
  std::vector<int64_t> padding;
  bool same = false;
  std::vector<int64_t> output_padding;  // transposed only: extra size at the end (as PyTorch)
  int64_t groups = 1;
  bool bias = true;
  bool transposed = false;
  Init init = Init::glorot_uniform;
  double l2 = 0.0;  // L2 penalty on the kernel
};

class ConvLayer : public Layer {
 public:
  explicit ConvLayer(ConvOptions o);
  std::string kind() const override { return opts_.transposed ? "conv_transpose" : "conv"; }
  std::vector<Shape> infer_shapes(const std::vector<Shape>& in) const override;
  std::vector<ParamSpec> param_specs(const std::vector<Shape>& in) const override;
  BackwardNeeds backward_needs(size_t n_in, size_t n_out) const override;
  void create(CreateContext& ctx) override;
  void forward(RunContext& ctx) override;
  void backward(RunContext& ctx) override;
  Flops flops(const std::vector<Shape>& in, const std::vector<Shape>& out) const override;
  std::string describe() const override;

  const ConvOptions& options() const { return opts_; }

 private:
  ConvDesc make_desc(const Shape& in, const Shape& out, DType dtype) const;
  ConvOptions opts_;
  EltwiseDesc post_op_;
  bool bias_grad_ = true;  // false: the compile step computes the bias gradient elsewhere
  std::unique_ptr<ConvKernel> kernel_;
  bool need_input_grad_ = false;
};

// Builder helpers: graph nodes of kind "conv" and "conv_transpose".
namespace layers {
LayerSpec conv(const ConvOptions& o);
LayerSpec conv_transpose(const ConvOptions& o);
}  // namespace layers

}  // namespace crest
