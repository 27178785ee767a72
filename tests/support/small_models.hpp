// Small graphs that exercise every path of the compile step: channels-last input (reorder),
// fused conv+activation, pooling, a value read by two layers (gradient accumulation), concat,
// flatten, dense with L2, dropout, tanh/scale and an MSE loss; a segmentation graph (strided,
// dilated and grouped conv, transposed conv, global pooling, softmax cross-entropy) and a 3-D
// regression graph (average pooling, global pooling).
#pragma once
#include <memory>

#include "crest/graph/graph.hpp"
#include "crest/layers/activation.hpp"
#include "crest/layers/conv.hpp"
#include "crest/layers/dense.hpp"
#include "crest/layers/elementwise.hpp"
#include "crest/layers/loss.hpp"
#include "crest/layers/pool.hpp"
#include "crest/layers/shape_ops.hpp"
#include "crest/models/cosmoflow.hpp"

namespace crest::test {

// The reference CosmoFlow network at size^3 with conv_size filters in the first block: every
// layer of the real one, small enough for a unit test. Dropout and L2 as the caller needs.
inline CosmoFlowOptions small_cosmoflow(int64_t size = 32, int64_t conv_size = 4,
                                        double dropout = 0.0, double l2 = 0.0) {
  CosmoFlowOptions o;
  o.input_shape = {size, size, size, 4};
  o.conv_size = conv_size;
  o.dropout = dropout;
  o.l2 = l2;
  return o;
}

struct SmallModel {
  Graph graph;
  ValueId x, y, out, loss;
};

// 2-D: x [3, 6, 8] channels-last -> conv3x3(4) -> leaky -> maxpool2 -> {conv1x1(4) -> relu} + skip
// -> concat(skip) -> flatten -> dense(5, l2) -> tanh -> dense(2) -> scale 1.2 -> mse.
inline SmallModel branchy_model(float dropout = 0.f) {
  SmallModel m;
  Graph& g = m.graph;
  m.x = g.input("x", Shape{3, 6, 8}, Layout::channels_last);
  m.y = g.input("y", Shape{2});
  ConvOptions c1;
  c1.out_channels = 4;
  c1.kernel = {3, 3};
  c1.same = true;
  ValueId t = g.add("conv1", layers::conv(c1), {m.x});
  t = g.add("act1", layers::leaky_relu(0.3f), {t});
  PoolOptions p;
  p.kernel = {2, 2};
  const ValueId pooled = g.add("pool1", layers::pool(p), {t});
  ConvOptions c2;
  c2.out_channels = 4;
  c2.kernel = {1, 1};
  ValueId b = g.add("conv2", layers::conv(c2), {pooled});
  b = g.add("act2", layers::tanh(), {b});
  ValueId s = g.add("add", layers::add(), {b, pooled});
  s = g.add("concat", layers::concat(), {s, pooled});
  s = g.add("flatten", layers::flatten(), {s});
  s = g.add("fc1", layers::dense(DenseOptions{5, true, Init::glorot_uniform, 0.1}), {s});
  s = g.add("fc1_act", layers::sigmoid(), {s});
  if (dropout > 0) s = g.add("drop", layers::dropout(dropout), {s});
  s = g.add("fc2", layers::dense(DenseOptions{2, true, Init::glorot_uniform, 0.0}), {s});
  s = g.add("tanh", layers::tanh(), {s});
  m.out = g.add("scale", layers::scale(1.2f), {s});
  m.loss = g.add("loss", layers::mse_loss(), {m.out, m.y});
  g.mark_output(m.out);
  g.set_loss(m.loss);
  return m;
}

// 2-D segmentation, DeepLab-shaped: x [2, 8, 8] -> conv3x3 stride 2 (4) -> relu -> grouped,
// dilated, bias-free conv3x3 'same' (4, groups 2, dilation 2) -> leaky relu -> transposed conv3x3
// stride 2 (padding 1, output padding 1) back to 8x8 with 3 class logits -> class-weighted softmax
// cross-entropy against int32 labels [8, 8].
inline SmallModel segmentation_model() {
  SmallModel m;
  Graph& g = m.graph;
  m.x = g.input("x", Shape{2, 8, 8});
  m.y = g.input("y", Shape{8, 8}, Layout::plain, /*integer=*/true);
  ConvOptions down;
  down.out_channels = 4;
  down.kernel = {3, 3};
  down.stride = {2, 2};
  down.padding = {1, 1};
  ValueId t = g.add("down", layers::conv(down), {m.x});
  t = g.add("down_act", layers::relu(), {t});
  ConvOptions atrous;
  atrous.out_channels = 4;
  atrous.kernel = {3, 3};
  atrous.dilation = {2, 2};
  atrous.same = true;
  atrous.groups = 2;
  atrous.bias = false;
  t = g.add("atrous", layers::conv(atrous), {t});
  t = g.add("atrous_act", layers::leaky_relu(0.2f), {t});
  ConvOptions up;
  up.out_channels = 3;
  up.kernel = {3, 3};
  up.stride = {2, 2};
  up.padding = {1, 1};
  up.output_padding = {1, 1};
  up.transposed = true;
  m.out = g.add("up", layers::conv(up), {t});
  m.loss = g.add("loss", layers::softmax_cross_entropy(std::vector<float>{1.0f, 2.6f, 1.7f}),
                 {m.out, m.y});
  g.mark_output(m.out);
  g.set_loss(m.loss);
  return m;
}

// 3-D regression with the pooling kinds CosmoFlow does not use: x [2, 6, 6, 6] channels-last ->
// conv3x3x3 (3) -> tanh -> avg pool 2 -> {global avg pool} and {conv1x1x1 (2) -> global avg pool}
// -> concat -> flatten -> dense(2) -> mse.
inline SmallModel pooling3d_model() {
  SmallModel m;
  Graph& g = m.graph;
  m.x = g.input("x", Shape{2, 6, 6, 6}, Layout::channels_last);
  m.y = g.input("y", Shape{2});
  ConvOptions c;
  c.out_channels = 3;
  c.kernel = {3, 3, 3};
  c.same = true;
  ValueId t = g.add("conv", layers::conv(c), {m.x});
  t = g.add("conv_act", layers::tanh(), {t});
  PoolOptions avg;
  avg.kind = PoolKind::avg_exclude_pad;
  avg.kernel = {2, 2, 2};
  t = g.add("avg", layers::pool(avg), {t});
  PoolOptions global;
  global.kind = PoolKind::avg_exclude_pad;
  global.global = true;
  const ValueId a = g.add("global_a", layers::pool(global), {t});
  ConvOptions pw;
  pw.out_channels = 2;
  pw.kernel = {1, 1, 1};
  ValueId b = g.add("pointwise", layers::conv(pw), {t});
  b = g.add("global_b", layers::pool(global), {b});
  ValueId s = g.add("concat", layers::concat(), {a, b});
  s = g.add("flatten", layers::flatten(), {s});
  m.out = g.add("fc", layers::dense(DenseOptions{2, true, Init::glorot_uniform, 0.0}), {s});
  m.loss = g.add("loss", layers::mse_loss(), {m.out, m.y});
  g.mark_output(m.out);
  g.set_loss(m.loss);
  return m;
}

}  // namespace crest::test
