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
  // the odd pixel of padding going to the end; transposed, output = in * stride, as TensorFlow's
  // conv2d_transpose (the adjoint of the 'same' conv from the output back to the input).
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
  bool computes_in_half() const override { return true; }
  // A transposed convolution's weight-gradient kernel always computes its bias gradient.
  bool bias_grad_can_move() const override { return !opts_.transposed && opts_.bias; }
  SpatialRole spatial_role() const override { return SpatialRole::windowed; }
  std::vector<WindowAxis> window_axes(const Shape& in, const Shape& out) const override {
    return crest::window_axes(make_desc(in, out, DType::f32));
  }
  // ConvKernel's post-op: whatever the backend fuses.
  bool accepts_post_op(const Backend& backend, const EltwiseDesc& e) const override {
    return backend.fuses(e);
  }
  std::vector<Shape> infer_shapes(const std::vector<Shape>& in) const override;
  std::vector<ParamSpec> param_specs(const std::vector<Shape>& in) const override;
  BackwardNeeds backward_needs(size_t n_in, size_t n_out) const override;
  bool absorbs_channel_affine() const override { return true; }
  void absorb_channel_affine(const std::vector<void*>& params, const std::vector<void*>& folded,
                             DType dtype, const std::vector<double>& scale,
                             const std::vector<double>& shift) const override;
  void create(CreateContext& ctx) override;
  void forward(RunContext& ctx) override;
  void backward(RunContext& ctx) override;
  Flops flops(const std::vector<Shape>& in, const std::vector<Shape>& out) const override;
  std::string describe() const override;
  std::string implementation() const override { return kernel_ ? kernel_->implementation() : ""; }

  const ConvOptions& options() const { return opts_; }

 private:
  // The output channel weight element `i` contributes to (layouts: param_specs).
  int64_t output_channel_of(int64_t i) const;
  template <typename T>
  void absorb(const std::vector<void*>& params, const std::vector<void*>& folded,
              const std::vector<double>& scale, const std::vector<double>& shift) const;
  ConvDesc make_desc(const Shape& in, const Shape& out, DType dtype) const;
  ConvOptions opts_;
  EltwiseDesc post_op_;
  bool bias_grad_ = true;  // false: the compile step computes the bias gradient elsewhere
  std::unique_ptr<ConvKernel> kernel_;
  bool need_input_grad_ = false;
  bool folded_affine_ = false;  // inference: a batch norm folded in (CreateContext::folded_affine)
  int64_t in_channels_ = 0, weight_count_ = 0;
};

// Builder helpers: graph nodes of kind "conv" and "conv_transpose".
namespace layers {
LayerSpec conv(const ConvOptions& o);
LayerSpec conv_transpose(const ConvOptions& o);
}  // namespace layers

}  // namespace crest
