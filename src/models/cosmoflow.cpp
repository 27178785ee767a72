#include "crest/models/cosmoflow.hpp"

#include <charconv>
#include <memory>

#include "crest/core/error.hpp"
#include "crest/layers/activation.hpp"
#include "crest/layers/conv.hpp"
#include "crest/layers/dense.hpp"
#include "crest/layers/elementwise.hpp"
#include "crest/layers/loss.hpp"
#include "crest/layers/pool.hpp"
#include "crest/layers/shape_ops.hpp"
#include "crest/models/model_registry.hpp"

namespace crest {
namespace {

LayerSpec hidden_activation(Activation a) {
  switch (a) {
    case Activation::leaky_relu:
      return layers::leaky_relu(0.3f);
    case Activation::relu:
      return layers::relu();
    case Activation::tanh:
      return layers::tanh();
  }
  throw_input("model.hidden_activation: unsupported value");
}

}  // namespace

CosmoFlowModel build_cosmoflow(const CosmoFlowOptions& o) {
  if (o.input_shape.size() != 4) throw_input("model.input_shape: expected [D, H, W, C]");
  const int64_t d = o.input_shape[0], h = o.input_shape[1], w = o.input_shape[2],
                c = o.input_shape[3];
  const int64_t div = int64_t{1} << o.n_conv_layers;
  if (d % div || h % div || w % div || d < div || h < div || w < div)
    throw_input("model.input_shape: spatial sizes must be positive multiples of " +
                std::to_string(div) + " (2^n_conv_layers)");
  const PoolKind pool = o.pooling_type == Pooling::max ? PoolKind::max : PoolKind::avg_include_pad;

  CosmoFlowModel m;
  Graph& g = m.graph;
  m.x = g.input("x", Shape{c, d, h, w}, Layout::channels_last);
  m.y = g.input("y", Shape{o.target_size});
  ValueId t = m.x;
  for (int i = 0; i < o.n_conv_layers; ++i) {
    const std::string k = std::to_string(i + 1);
    ConvOptions co;
    co.out_channels = o.conv_size << i;
    co.kernel = {o.kernel_size, o.kernel_size, o.kernel_size};
    co.same = true;
    co.init = Init::glorot_uniform;
    t = g.add("conv" + k, layers::conv(co), {t});
    t = g.add("act" + k, hidden_activation(o.hidden_activation), {t});
    PoolOptions po;
    po.kind = pool;
    po.kernel = {2, 2, 2};
    t = g.add("pool" + k, layers::pool(po), {t});
  }
  t = g.add("flatten", layers::flatten(), {t});
  const int64_t hidden[2] = {o.fc1_size, o.fc2_size};
  for (int i = 0; i < 2; ++i) {
    const std::string k = std::to_string(i + 1);
    t = g.add("fc" + k, layers::dense(DenseOptions{hidden[i], true, Init::glorot_uniform, o.l2}),
              {t});
    t = g.add("fc" + k + "_act", hidden_activation(o.hidden_activation), {t});
    if (o.dropout > 0)
      t = g.add("fc" + k + "_dropout", layers::dropout(static_cast<float>(o.dropout)), {t});
  }
  t = g.add("fc3", layers::dense(DenseOptions{o.target_size, true, Init::glorot_uniform, 0.0}),
            {t});
  t = g.add("tanh", layers::tanh(), {t});
  m.prediction = g.add("output_scale", layers::scale(1.2f), {t});
  m.loss = g.add("loss", layers::mse_loss(), {m.prediction, m.y});
  g.mark_output(m.prediction);
  g.set_loss(m.loss);
  return m;
}

int64_t cosmoflow_parameter_count(const CosmoFlowOptions& o) {
  int64_t n = 0, cin = o.input_shape[3], k3 = o.kernel_size * o.kernel_size * o.kernel_size;
  for (int i = 0; i < o.n_conv_layers; ++i) {
    const int64_t cout = o.conv_size << i;
    n += cout * cin * k3 + cout;
    cin = cout;
  }
  const int64_t div = int64_t{1} << o.n_conv_layers;
  const int64_t flat =
      cin * (o.input_shape[0] / div) * (o.input_shape[1] / div) * (o.input_shape[2] / div);
  n += o.fc1_size * flat + o.fc1_size + o.fc2_size * o.fc1_size + o.fc2_size +
       o.target_size * o.fc2_size + o.target_size;
  return n;
}

namespace {

using O = CosmoFlowOptions;

// The section keys are the reference's (mlcommons/hpc cosmoflow/configs), in its order.
std::vector<AttrField<O>> cosmoflow_fields() {
  return {attr_field("input_shape", &O::input_shape),
          attr_field("kernel_size", &O::kernel_size),
          attr_field("target_size", &O::target_size),
          attr_field("conv_size", &O::conv_size),
          attr_field("n_conv_layers", &O::n_conv_layers),
          attr_field("fc1_size", &O::fc1_size),
          attr_field("fc2_size", &O::fc2_size),
          spelled_field("hidden_activation", &O::hidden_activation),
          spelled_field("pooling_type", &O::pooling_type),
          attr_field("dropout", &O::dropout),
          attr_field("l2", &O::l2)};
}

// The reference's defaults: as O{}, but with its dropout (O{} has none, for exact tests).
O reference_options() {
  O o;
  o.dropout = 0.5;
  return o;
}

std::string number_text(double v) {
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, end);
}

void check_positive(const char* key, int64_t v, int64_t max = 1 << 30) {
  if (v < 1) throw ModelKeyError(key, "expected a positive integer, got " + std::to_string(v));
  if (v > max)
    throw ModelKeyError(
        key, "value " + std::to_string(v) + " is too large (at most " + std::to_string(max) + ")");
}

// Every conv block halves each spatial size with a 2x2x2 pool.
void check_input_shape(const O& o) {
  const auto& s = o.input_shape;
  if (s.size() != 4)
    throw ModelKeyError("input_shape",
                        "expected 4 entries [D, H, W, C], got " + model_list_text(s));
  for (int64_t v : s)
    if (v < 1)
      throw ModelKeyError("input_shape", "entries must be positive, got " + model_list_text(s));
  const int64_t divisor = int64_t{1} << o.n_conv_layers;
  for (size_t i = 0; i < 3; ++i)
    if (s[i] % divisor != 0)
      throw ModelKeyError("input_shape",
                          "spatial size " + std::to_string(s[i]) + " in " + model_list_text(s) +
                              " is not divisible by " + std::to_string(divisor) +
                              " = 2^model.n_conv_layers (" + std::to_string(o.n_conv_layers) +
                              " pooling layers halve it)");
}

void check_cosmoflow(const O& o) {
  check_positive("kernel_size", o.kernel_size);
  // 'same' padding with an even kernel pads asymmetrically; crest's conv kernels do not.
  if (o.kernel_size % 2 == 0)
    throw ModelKeyError("kernel_size", "expected an odd kernel size ('same' padding), got " +
                                           std::to_string(o.kernel_size));
  check_positive("target_size", o.target_size);
  check_positive("conv_size", o.conv_size);
  check_positive("n_conv_layers", o.n_conv_layers, 20);
  check_positive("fc1_size", o.fc1_size);
  check_positive("fc2_size", o.fc2_size);
  if (o.dropout < 0 || o.dropout >= 1)
    throw ModelKeyError("dropout",
                        "expected a probability in [0, 1), got " + number_text(o.dropout));
  if (o.l2 < 0) throw ModelKeyError("l2", "must not be negative, got " + number_text(o.l2));
  check_input_shape(o);
}

BuiltModel built_cosmoflow(const O& o) {
  CosmoFlowModel c = build_cosmoflow(o);
  BuiltModel b;
  b.graph = std::move(c.graph);
  b.prediction = c.prediction;
  b.loss = c.loss;
  return b;
}

}  // namespace

CosmoFlowOptions cosmoflow_options(const Attributes& canonical) {
  return read_model_options(cosmoflow_fields(), reference_options(), canonical);
}

CREST_REGISTER_MODEL(cosmoflow, model_kind<O>("cosmoflow", cosmoflow_fields(), reference_options(),
                                              check_cosmoflow, built_cosmoflow));

}  // namespace crest
