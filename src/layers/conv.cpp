#include "crest/layers/conv.hpp"

#include <sstream>

#include "crest/core/error.hpp"
#include "crest/graph/spatial_split.hpp"

namespace crest {
namespace {

std::vector<int64_t> per_dim(const std::vector<int64_t>& v, size_t rank, int64_t dflt,
                             const char* what) {
  if (v.empty()) return std::vector<int64_t>(rank, dflt);
  if (v.size() == 1) return std::vector<int64_t>(rank, v[0]);
  if (v.size() != rank)
    throw_input(std::string("conv ") + what + " has " + std::to_string(v.size()) +
                " entries for a " + std::to_string(rank) + "-D kernel");
  return v;
}

std::vector<AttrField<ConvOptions>> conv_fields(bool transposed) {
  using O = ConvOptions;
  std::vector<AttrField<O>> f = {attr_field("out_channels", &O::out_channels),
                                 attr_field("kernel", &O::kernel),
                                 attr_field("stride", &O::stride),
                                 attr_field("dilation", &O::dilation),
                                 attr_field("padding", &O::padding),
                                 attr_field("groups", &O::groups),
                                 attr_field("bias", &O::bias),
                                 attr_field("init", &O::init),
                                 attr_field("l2", &O::l2)};
  f.push_back(attr_field("same", &O::same));
  if (transposed) f.push_back(attr_field("output_padding", &O::output_padding));
  return f;
}

}  // namespace

CREST_REGISTER_LAYER(conv, layer_kind<ConvLayer, ConvOptions>("conv", conv_fields(false),
                                                              [](ConvOptions& o) {
                                                                o.transposed = false;
                                                              }));
CREST_REGISTER_LAYER(conv_transpose,
                     layer_kind<ConvLayer, ConvOptions>("conv_transpose", conv_fields(true),
                                                        [](ConvOptions& o) {
                                                          o.transposed = true;
                                                        }));

LayerSpec layers::conv(const ConvOptions& o) {
  if (o.transposed) return conv_transpose(o);
  return layer_spec("conv", conv_fields(false), o);
}

LayerSpec layers::conv_transpose(const ConvOptions& o) {
  return layer_spec("conv_transpose", conv_fields(true), o);
}

ConvLayer::ConvLayer(ConvOptions o) : opts_(std::move(o)) {
  const size_t r = opts_.kernel.size();
  if (r < 1 || r > 3) throw_input("conv kernel must have 1 to 3 spatial dimensions");
  opts_.stride = per_dim(opts_.stride, r, 1, "stride");
  opts_.dilation = per_dim(opts_.dilation, r, 1, "dilation");
  opts_.padding = per_dim(opts_.padding, r, 0, "padding");
  opts_.output_padding = per_dim(opts_.output_padding, r, 0, "output_padding");
  for (size_t i = 0; i < r; ++i) {
    if (opts_.kernel[i] < 1 || opts_.stride[i] < 1 || opts_.dilation[i] < 1 || opts_.padding[i] < 0)
      throw_input("conv kernel, stride and dilation must be >= 1 and padding >= 0");
  }
  if (opts_.out_channels < 1 || opts_.groups < 1)
    throw_input("conv needs out_channels, groups >= 1");
  if (opts_.same)
    for (size_t i = 0; i < r; ++i)
      if (opts_.padding[i] != 0 || opts_.output_padding[i] != 0)
        throw_input(
            "conv 'same' padding computes the padding itself: give 'same' or "
            "padding/output_padding, not both");
}

ConvDesc ConvLayer::make_desc(const Shape& in, const Shape& out, DType dtype) const {
  ConvDesc d;
  const int r = static_cast<int>(opts_.kernel.size());
  d.spatial_rank = r;
  d.n = in[0];
  d.in_channels = in[1];
  d.out_channels = opts_.out_channels;
  d.groups = opts_.groups;
  d.bias = opts_.bias;
  d.transposed = opts_.transposed;
  d.post_op = post_op_;
  d.dtype = dtype;
  for (int i = 0; i < r; ++i) {
    const auto u = static_cast<size_t>(i);
    d.in_size[u] = in[2 + i];
    d.out_size[u] = out[2 + i];
    d.kernel[u] = opts_.kernel[u];
    d.stride[u] = opts_.stride[u];
    d.dilation[u] = opts_.dilation[u];
    const int64_t eff = opts_.dilation[u] * (opts_.kernel[u] - 1) + 1;
    if (opts_.same) {
      // A transposed conv is the adjoint of the conv from its output to its input: TensorFlow's
      // conv2d_transpose pads that conv as 'same' would, the odd pixel at the end.
      const int64_t small = opts_.transposed ? d.in_size[u] : d.out_size[u];
      const int64_t large = opts_.transposed ? d.out_size[u] : d.in_size[u];
      const int64_t total = std::max<int64_t>((small - 1) * d.stride[u] + eff - large, 0);
      d.pad_lo[u] = total / 2;
      d.pad_hi[u] = total - total / 2;
    } else {
      d.pad_lo[u] = opts_.padding[u];
      // Transposed: output_padding adds rows at the end, i.e. less padding cropped there.
      d.pad_hi[u] = opts_.padding[u] - (opts_.transposed ? opts_.output_padding[u] : 0);
    }
  }
  return d;
}

std::vector<Shape> ConvLayer::infer_shapes(const std::vector<Shape>& in) const {
  const int r = static_cast<int>(opts_.kernel.size());
  if (in.size() != 1) throw_input("conv takes one input");
  if (in[0].rank() != r + 2)
    throw_input("conv with a " + std::to_string(r) + "-D kernel needs a rank-" +
                std::to_string(r + 2) + " input [N, C, spatial], got " + in[0].str());
  if (in[0][1] % opts_.groups || opts_.out_channels % opts_.groups)
    throw_input("conv channels (" + std::to_string(in[0][1]) + " in, " +
                std::to_string(opts_.out_channels) + " out) are not divisible by groups " +
                std::to_string(opts_.groups));
  std::vector<int64_t> out{in[0][0], opts_.out_channels};
  for (int i = 0; i < r; ++i) {
    const auto u = static_cast<size_t>(i);
    const int64_t x = in[0][2 + i];
    const int64_t eff = opts_.dilation[u] * (opts_.kernel[u] - 1) + 1;
    int64_t o;
    if (opts_.transposed && opts_.same) {
      o = x * opts_.stride[u];  // TensorFlow's conv2d_transpose with padding 'same'
    } else if (opts_.transposed) {
      o = (x - 1) * opts_.stride[u] - 2 * opts_.padding[u] + eff + opts_.output_padding[u];
    } else if (opts_.same) {
      o = (x + opts_.stride[u] - 1) / opts_.stride[u];
    } else {
      o = (x + 2 * opts_.padding[u] - eff) / opts_.stride[u] + 1;
      if (x + 2 * opts_.padding[u] < eff) o = 0;
    }
    if (o < 1)
      throw_input("conv output would be empty for input " + in[0].str() + " (kernel " +
                  std::to_string(opts_.kernel[u]) + ")");
    out.push_back(o);
  }
  return {Shape(out)};
}

std::vector<ParamSpec> ConvLayer::param_specs(const std::vector<Shape>& in) const {
  const int64_t cin = in[0][1], g = opts_.groups, cout = opts_.out_channels;
  int64_t kvol = 1;
  for (auto k : opts_.kernel) kvol *= k;
  std::vector<int64_t> w =
      opts_.transposed ? std::vector<int64_t>{cin, cout / g} : std::vector<int64_t>{cout, cin / g};
  for (auto k : opts_.kernel) w.push_back(k);
  ParamSpec weight{"weight", Shape(w), opts_.init, cin / g * kvol, cout / g * kvol, opts_.l2, true};
  if (opts_.transposed) std::swap(weight.fan_in, weight.fan_out);
  std::vector<ParamSpec> specs{weight};
  if (opts_.bias) {
    ParamSpec b{"bias", Shape{cout}, Init::zeros, weight.fan_in, weight.fan_out, 0.0, true};
    if (opts_.init == Init::torch_default) b.init = Init::torch_default;
    specs.push_back(b);
  }
  return specs;
}

BackwardNeeds ConvLayer::backward_needs(size_t n_in, size_t n_out) const {
  BackwardNeeds n{std::vector<bool>(n_in, true), std::vector<bool>(n_out, false), false};
  return n;
}

int64_t ConvLayer::output_channel_of(int64_t i) const {
  const int64_t g = opts_.groups, cout = opts_.out_channels;
  const int64_t kvol = weight_count_ / (in_channels_ * cout / g);
  if (!opts_.transposed) return i / (in_channels_ / g * kvol);  // [cout, cin/g, k...]
  const int64_t cin_index = i / (cout / g * kvol);              // [cin, cout/g, k...]
  const int64_t j = i / kvol % (cout / g);
  return cin_index / (in_channels_ / g) * (cout / g) + j;
}

// W'[o] = W[o] * scale[o], b'[o] = b[o] * scale[o] + shift[o] (b = 0 without a bias): the
// convolution followed by the affine, as one convolution.
template <typename T>
void ConvLayer::absorb(const std::vector<void*>& params, const std::vector<void*>& folded,
                       const std::vector<double>& scale, const std::vector<double>& shift) const {
  const T* w = static_cast<const T*>(params[0]);
  T* fw = static_cast<T*>(folded[0]);
  for (int64_t i = 0; i < weight_count_; ++i)
    fw[i] = static_cast<T>(w[i] * scale[static_cast<size_t>(output_channel_of(i))]);
  const T* b = opts_.bias ? static_cast<const T*>(params[1]) : nullptr;
  T* fb = static_cast<T*>(folded[1]);
  for (size_t o = 0; o < scale.size(); ++o)
    fb[o] = static_cast<T>((b ? static_cast<double>(b[o]) * scale[o] : 0.0) + shift[o]);
}

void ConvLayer::absorb_channel_affine(const std::vector<void*>& params,
                                      const std::vector<void*>& folded, DType dtype,
                                      const std::vector<double>& scale,
                                      const std::vector<double>& shift) const {
  if (dtype == DType::f64)
    absorb<double>(params, folded, scale, shift);
  else
    absorb<float>(params, folded, scale, shift);
}

void ConvLayer::create(CreateContext& ctx) {
  post_op_ = ctx.post_op;
  bias_grad_ = opts_.bias && !ctx.bias_grad_elsewhere;
  folded_affine_ = ctx.folded_affine;
  in_channels_ = ctx.in_shapes[0][1];
  weight_count_ = param_specs(ctx.in_shapes)[0].shape.numel();
  ConvDesc d = make_desc(ctx.in_shapes[0], ctx.out_shapes[0], ctx.dtype);
  d.bias = opts_.bias || folded_affine_;
  d.bias_grad = bias_grad_;
  d.training = ctx.training;
  d.data_grad = ctx.training && ctx.need_input_grad[0];
  if (ctx.spatial) {
    // Split spatially: the kernel works on this rank's block, from the whole layer's descriptor.
    ConvDesc global = make_desc(ctx.global_in_shapes[0], ctx.global_out_shapes[0], ctx.dtype);
    global.bias = d.bias;
    global.bias_grad = d.bias_grad;
    global.training = d.training;
    global.data_grad = d.data_grad;
    kernel_ = ctx.spatial->conv(ctx.backend, global, ctx.name);
  } else {
    kernel_ = ctx.backend.conv(d, ctx.in_formats[0]);
  }
  ctx.in_formats[0] = kernel_->src_format();
  ctx.out_formats = {kernel_->dst_format()};
  ctx.scratch_bytes = kernel_->scratch_bytes();
  need_input_grad_ = ctx.need_input_grad[0];
}

void ConvLayer::forward(RunContext& ctx) {
  kernel_->forward(ctx.in[0], ctx.params[0], opts_.bias || folded_affine_ ? ctx.params[1] : nullptr,
                   ctx.out[0], ctx.scratch);
}

void ConvLayer::backward(RunContext& ctx) {
  // Weights first: the data gradient is skipped entirely when nobody needs it (first layer).
  kernel_->backward_weights(ctx.in[0], ctx.diff_out[0], ctx.grads[0],
                            bias_grad_ ? ctx.grads[1] : nullptr, ctx.scratch);
  if (need_input_grad_ && ctx.diff_in[0])
    kernel_->backward_data(ctx.diff_out[0], ctx.params[0], ctx.diff_in[0], ctx.scratch);
}

Flops ConvLayer::flops(const std::vector<Shape>& in, const std::vector<Shape>& out) const {
  // Multiply-adds per output element of a direct convolution, times 2; transposed swaps roles.
  int64_t kvol = 1;
  for (auto k : opts_.kernel) kvol *= k;
  const Shape& big = opts_.transposed ? in[0] : out[0];
  const int64_t cin_per_group =
      opts_.transposed ? out[0][1] / opts_.groups : in[0][1] / opts_.groups;
  const double f =
      2.0 * static_cast<double>(big.numel()) * static_cast<double>(cin_per_group * kvol);
  return {f, need_input_grad_ ? f : 0.0, f};
}

std::string ConvLayer::describe() const {
  std::ostringstream os;
  for (size_t i = 0; i < opts_.kernel.size(); ++i) os << (i ? "x" : "") << opts_.kernel[i];
  os << " s" << opts_.stride[0];
  if (opts_.same)
    os << " same";
  else
    os << " p" << opts_.padding[0];
  if (opts_.dilation[0] != 1) os << " d" << opts_.dilation[0];
  if (opts_.groups != 1) os << " g" << opts_.groups;
  if (post_op_.kind != EltwiseKind::none) os << " +fused act";
  return os.str();
}

}  // namespace crest
