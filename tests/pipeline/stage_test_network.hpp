// The network the pipeline tests cut into stages (tests/pipeline), and what a batch leaves in an
// executor: every rank also runs it whole, to compare its stage against.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "crest/graph/executor.hpp"
#include "crest/graph/graph.hpp"
#include "crest/layers/activation.hpp"
#include "crest/layers/batch_norm.hpp"
#include "crest/layers/conv.hpp"
#include "crest/layers/dense.hpp"
#include "crest/layers/elementwise.hpp"
#include "crest/layers/loss.hpp"
#include "crest/layers/pool.hpp"
#include "crest/layers/shape_ops.hpp"
#include "world.hpp"

namespace crest::test {

inline const Shape kSample{2, 6, 6, 4};  // [c, d, h, w], channels-last in memory

// x -> conv 3^3 (4) -> batch norm -> leaky -> dropout -> max-pool 2 -> {conv 3^3 (3) + tanh} +
// conv 1^3 (3) -> avg-pool -> flatten -> dropout -> dense (3, L2 0.01) -> MSE against y [3]. The
// skip branch makes pool1's output cross two cuts at once (it passes through a stage).
inline Graph network() {
  Graph g;
  const ValueId x = g.input("x", kSample, Layout::channels_last);
  const ValueId y = g.input("y", Shape{3});
  ConvOptions c;
  c.out_channels = 4;
  c.kernel = {3, 3, 3};
  c.same = true;
  ValueId t = g.add("conv1", layers::conv(c), {x});
  t = g.add("bn1", layers::batch_norm(), {t});
  t = g.add("act1", layers::leaky_relu(0.3f), {t});
  t = g.add("drop1", layers::dropout(0.25f), {t});
  const ValueId pooled = g.add("pool1", layers::pool(PoolOptions{}), {t});
  c.out_channels = 3;
  ValueId a = g.add("conv2", layers::conv(c), {pooled});
  a = g.add("act2", layers::tanh(), {a});
  ConvOptions one = c;
  one.kernel = {1, 1, 1};
  one.same = false;
  const ValueId b = g.add("conv3", layers::conv(one), {pooled});
  t = g.add("add", layers::add(), {a, b});
  PoolOptions avg;
  avg.kind = PoolKind::avg_include_pad;
  t = g.add("pool2", layers::pool(avg), {t});
  t = g.add("flatten", layers::flatten(), {t});
  t = g.add("drop2", layers::dropout(0.3f), {t});
  DenseOptions d;
  d.out_features = 3;
  d.l2 = 0.01;
  d.init = Init::torch_default;
  const ValueId out = g.add("fc", layers::dense(d), {t});
  g.mark_output(out);
  g.set_loss(g.add("loss", layers::mse_loss(), {out, y}));
  return g;
}

// What a batch leaves: the mean loss, and per parameter (by name) its gradient or its value for
// the non-trained ones.
struct BatchResult {
  double loss = 0;
  std::map<std::string, std::vector<double>> grads, state;
};

inline void collect(const Executor& ex, BatchResult& r) {
  const ParamStore& p = ex.params();
  for (size_t s = 0; s < p.slots().size(); ++s) {
    const ParamSlot& slot = p.slots()[s];
    (slot.spec.trainable ? r.grads : r.state)[slot.name] =
        read(slot.spec.trainable ? p.grad(s) : p.value(s));
  }
}

// One batch of `micro_batches` through `ex` (the whole network, as one process accumulating),
// `feed(m)` writing micro-batch m's inputs into it: the mean loss, the micro-batches' mean
// gradient, and the non-trained state after them.
inline BatchResult accumulate_batch(Executor& ex, int micro_batches,
                                    const std::function<void(int)>& feed) {
  BatchResult r;
  std::map<std::string, std::vector<double>> sum;
  for (int m = 0; m < micro_batches; ++m) {
    feed(m);
    r.loss += ex.forward() / micro_batches;
    ex.backward();
    BatchResult one;
    collect(ex, one);
    for (auto& [name, g] : one.grads) {
      auto& s = sum[name];
      s.resize(g.size());
      for (size_t i = 0; i < g.size(); ++i) s[i] += g[i];
    }
  }
  collect(ex, r);
  for (auto& [name, g] : sum) {
    for (double& v : g) v /= micro_batches;
    r.grads[name] = g;
  }
  return r;
}

}  // namespace crest::test
