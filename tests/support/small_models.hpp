// Small graphs that exercise every path of the compile step: channels-last input (reorder),
// fused conv+activation, pooling, a value read by two layers (gradient accumulation), concat,
// flatten, dense with L2, dropout, tanh/scale and an MSE loss.
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

namespace crest::test {

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
  ValueId t = g.add("conv1", std::make_unique<ConvLayer>(c1), {m.x});
  t = g.add("act1", ActivationLayer::leaky_relu(0.3f), {t});
  PoolOptions p;
  p.kernel = {2, 2};
  const ValueId pooled = g.add("pool1", std::make_unique<PoolLayer>(p), {t});
  ConvOptions c2;
  c2.out_channels = 4;
  c2.kernel = {1, 1};
  ValueId b = g.add("conv2", std::make_unique<ConvLayer>(c2), {pooled});
  b = g.add("act2", ActivationLayer::tanh(), {b});
  ValueId s = g.add("add", std::make_unique<AddLayer>(), {b, pooled});
  s = g.add("concat", std::make_unique<ConcatLayer>(), {s, pooled});
  s = g.add("flatten", std::make_unique<FlattenLayer>(), {s});
  s = g.add("fc1", std::make_unique<DenseLayer>(DenseOptions{5, true, Init::glorot_uniform, 0.1}), {s});
  s = g.add("fc1_act", ActivationLayer::sigmoid(), {s});
  if (dropout > 0) s = g.add("drop", std::make_unique<DropoutLayer>(dropout), {s});
  s = g.add("fc2", std::make_unique<DenseLayer>(DenseOptions{2, true, Init::glorot_uniform, 0.0}), {s});
  s = g.add("tanh", ActivationLayer::tanh(), {s});
  m.out = g.add("scale", ActivationLayer::scale(1.2f), {s});
  m.loss = g.add("loss", std::make_unique<MseLossLayer>(), {m.out, m.y});
  g.mark_output(m.out);
  g.set_loss(m.loss);
  return m;
}

}  // namespace crest::test
