#include "crest/models/cosmoflow.hpp"

#include <memory>

#include "crest/core/error.hpp"
#include "crest/layers/activation.hpp"
#include "crest/layers/conv.hpp"
#include "crest/layers/dense.hpp"
#include "crest/layers/elementwise.hpp"
#include "crest/layers/loss.hpp"
#include "crest/layers/pool.hpp"
#include "crest/layers/shape_ops.hpp"

namespace crest {
namespace {

LayerSpec hidden_activation(const std::string& name) {
  if (name == "LeakyReLU" || name == "leaky_relu") return layers::leaky_relu(0.3f);
  if (name == "ReLU" || name == "relu") return layers::relu();
  if (name == "Tanh" || name == "tanh") return layers::tanh();
  throw_input("model.hidden_activation: unsupported '" + name + "' (LeakyReLU, ReLU or Tanh)");
}

}  // namespace

CosmoFlowModel build_cosmoflow(const CosmoFlowOptions& o) {
  const int64_t d = o.input_shape[0], h = o.input_shape[1], w = o.input_shape[2],
                c = o.input_shape[3];
  const int64_t div = int64_t{1} << o.n_conv_layers;
  if (d % div || h % div || w % div || d < div || h < div || w < div)
    throw_input("model.input_shape: spatial sizes must be positive multiples of " +
                std::to_string(div) + " (2^n_conv_layers)");
  PoolKind pool;
  if (o.pooling_type == "MaxPool3D")
    pool = PoolKind::max;
  else if (o.pooling_type == "AvgPool3D")
    pool = PoolKind::avg_include_pad;
  else
    throw_input("model.pooling_type: unsupported '" + o.pooling_type +
                "' (MaxPool3D or AvgPool3D)");

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

}  // namespace crest
