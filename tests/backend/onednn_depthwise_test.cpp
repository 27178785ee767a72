// DeepLabv3+'s separable convolutions on the onednn backend as they sit in the network: a 1x1
// convolution, batch norm and ReLU deliver oneDNN's blocked layout to a depthwise 3x3 (groups =
// channels, no bias, padding = dilation), stride 1 or 2, dilation 1 or 2, followed by a pointwise
// 1x1. Every variant agrees with the reference backend; without dilation the depthwise
// convolution stays in the producer's nChw16c, where oneDNN 2.6 has jit_dw kernels for all three
// passes (docs/performance.md, "Depthwise kernels": ONEDNN_VERBOSE=1 on this test shows them).
#include <gtest/gtest.h>

#include <sstream>

#include "crest/graph/executor.hpp"
#include "crest/layers/activation.hpp"
#include "crest/layers/batch_norm.hpp"
#include "crest/layers/conv.hpp"
#include "crest/layers/loss.hpp"
#include "support/test_util.hpp"

namespace crest {
namespace {

struct Separable {
  int64_t stride, dilation;
};

Graph separable_graph(const Separable& s) {
  const int64_t c = 32, h = 12, w = 10;
  Graph g;
  const ValueId x = g.input("x", Shape{c, h, w});
  const ValueId y =
      g.input("y", Shape{c, (h + s.stride - 1) / s.stride, (w + s.stride - 1) / s.stride});
  ConvOptions pointwise;
  pointwise.out_channels = c;
  pointwise.kernel = {1, 1};
  pointwise.bias = false;
  ValueId t = g.add("pw0", layers::conv(pointwise), {x});
  t = g.add("bn", layers::batch_norm(), {t});
  t = g.add("relu", layers::relu(), {t});
  ConvOptions depthwise;
  depthwise.out_channels = c;
  depthwise.kernel = {3, 3};
  depthwise.groups = c;
  depthwise.bias = false;
  depthwise.stride = {s.stride};
  depthwise.dilation = {s.dilation};
  depthwise.padding = {s.dilation};
  t = g.add("dw", layers::conv(depthwise), {t});
  t = g.add("pw1", layers::conv(pointwise), {t});
  g.mark_output(t);
  g.set_loss(g.add("loss", layers::mse_loss(), {t, y}));
  return g;
}

std::unique_ptr<Executor> step(const Graph& g, Backend& b) {
  CompileOptions o;
  o.batch = 2;
  o.seed = 8;
  auto ex = std::make_unique<Executor>(g, b, o);
  test::fill_uniform(ex->input("x"), 1);
  test::fill_uniform(ex->input("y"), 2);
  ex->forward();
  ex->backward();
  return ex;
}

// The summary line of layer `name`.
std::string line_of(const std::string& summary, const std::string& name) {
  std::istringstream in(summary);
  for (std::string l; std::getline(in, l);)
    if (l.rfind(name + " ", 0) == 0) return l;
  return "";
}

TEST(OneDnnDepthwise, SeparableConvolutionsAgreeAndStayBlockedWithoutDilation) {
  CREST_SKIP_WITHOUT_BACKEND("onednn");
  auto reference = make_backend("reference");
  auto onednn = make_backend("onednn");
  for (const Separable s : {Separable{1, 1}, Separable{2, 1}, Separable{1, 2}}) {
    SCOPED_TRACE("stride " + std::to_string(s.stride) + " dilation " + std::to_string(s.dilation));
    const Graph g = separable_graph(s);
    const auto want = step(g, *reference);
    const auto got = step(g, *onednn);
    const ValueId out = g.outputs()[0];
    EXPECT_LT(test::rel_distance(got->output(out), want->output(out)), 2e-5);
    for (size_t k = 0; k < want->params().slots().size(); ++k)
      EXPECT_LT(test::rel_distance(got->params().grad(k), want->params().grad(k)), 2e-4)
          << want->params().slots()[k].name;
    if (s.dilation == 1) {
      // jit_dw in the layout batch norm and ReLU deliver: no reorder before or after.
      const std::string summary = got->summary();
      EXPECT_NE(line_of(summary, "dw").find("nChw16c"), std::string::npos) << summary;
      EXPECT_EQ(line_of(summary, "relu>reorder"), "") << summary;
      EXPECT_EQ(line_of(summary, "dw>reorder"), "") << summary;
    }
  }
}

}  // namespace
}  // namespace crest
