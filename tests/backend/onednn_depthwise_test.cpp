// DeepLabv3+'s separable convolutions on the onednn backend as they sit in the network: a 1x1
// convolution, batch norm and ReLU deliver oneDNN's blocked layout to a depthwise 3x3 (groups =
// channels, no bias, padding = dilation), stride 1 or 2, dilation 1 or 2, followed by a pointwise
// 1x1. Every variant agrees with the reference backend and stays in the producer's nChw16c:
// without dilation oneDNN has jit_dw kernels for all three passes (docs/performance.md,
// "Depthwise kernels": ONEDNN_VERBOSE=1 on this test shows them); with dilation crest's own loops
// run it (src/backends/onednn/depthwise_dilated.cpp), in float32 and bf16, with or without bias,
// any stride, dilation and kernel size up to 5x5.
#include <gtest/gtest.h>

#include <iostream>
#include <optional>
#include <sstream>
#include <string>

#include "crest/graph/executor.hpp"
#include "crest/layers/activation.hpp"
#include "crest/layers/batch_norm.hpp"
#include "crest/layers/conv.hpp"
#include "crest/layers/loss.hpp"
#include "onednn/format.hpp"
#include "support/test_util.hpp"

namespace crest {
namespace {

struct Separable {
  int64_t stride, dilation;
  int64_t dilation_w = 0;  // 0: as dilation
  int64_t kernel = 3;
  bool bias = false;
  int64_t channels = 32;
  std::string name() const {
    return "stride " + std::to_string(stride) + " dilation " + std::to_string(dilation) + "x" +
           std::to_string(dilation_w == 0 ? dilation : dilation_w) + " kernel " +
           std::to_string(kernel) + (bias ? " bias" : "") + " channels " + std::to_string(channels);
  }
};

Graph separable_graph(const Separable& s) {
  const int64_t c = s.channels, h = 12, w = 10;
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
  const int64_t dilation_w = s.dilation_w == 0 ? s.dilation : s.dilation_w;
  depthwise.kernel = {s.kernel, s.kernel};
  depthwise.groups = c;
  depthwise.bias = s.bias;
  depthwise.stride = {s.stride};
  depthwise.dilation = {s.dilation, dilation_w};  // "same" padding for an odd kernel
  depthwise.padding = {s.dilation * (s.kernel - 1) / 2, dilation_w * (s.kernel - 1) / 2};
  t = g.add("dw", layers::conv(depthwise), {t});
  t = g.add("pw1", layers::conv(pointwise), {t});
  g.mark_output(t);
  g.set_loss(g.add("loss", layers::mse_loss(), {t, y}));
  return g;
}

std::unique_ptr<Executor> step(const Graph& g, Backend& b,
                               std::optional<DType> half = std::nullopt) {
  CompileOptions o;
  o.batch = 2;
  o.seed = 8;
  o.half = half;
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

// Whether this CPU's oneDNN kernels block channels by 16 (AVX-512) rather than 8 (AVX2).
bool onednn_blocks_by_16() {
  const auto d = onednn::blocked_activation_desc({1, 16, 1, 1}, dnnl::memory::data_type::f32);
  return onednn::format_name(d) == "nChw16c";
}

// jit_dw or crest's dilated loops in the layout batch norm and ReLU deliver: no reorder before
// or after. crest's loops (dilated depthwise) read 16-channel blocks or channels-last: where
// oneDNN's kernels block by 8 (AVX2) they run channels-last between two reorders, a known cost
// there (docs/performance.md), so only the agreement is checked.
void expect_producers_layout_without_reorders(const Executor& ex, const Separable& s) {
  const bool crest_loops = s.dilation > 1 || s.dilation_w > 1;
  if (crest_loops && !onednn_blocks_by_16()) {
    std::cout << "[ note     ] 8-channel blocks here: the dilated loops run channels-last\n";
    return;
  }
  const std::string summary = ex.summary();
  // The layout the pointwise convolutions chose (blocked by 16 or 8; channels-last at SSE4.1).
  const std::string layout = test::layout_named_in(line_of(summary, "pw0"));
  EXPECT_NE(layout, "") << summary;
  EXPECT_EQ(test::layout_named_in(line_of(summary, "dw")), layout) << summary;
  EXPECT_EQ(line_of(summary, "relu>reorder"), "") << summary;
  EXPECT_EQ(line_of(summary, "dw>reorder"), "") << summary;
}

TEST(OneDnnDepthwise, SeparableConvolutionsAgreeAndStayBlocked) {
  CREST_SKIP_WITHOUT_BACKEND("onednn");
  auto reference = make_backend("reference");
  auto onednn = make_backend("onednn");
  for (const Separable s : {Separable{1, 1}, Separable{2, 1}, Separable{1, 2}}) {
    SCOPED_TRACE(s.name());
    const Graph g = separable_graph(s);
    const auto want = step(g, *reference);
    const auto got = step(g, *onednn);
    const ValueId out = g.outputs()[0];
    EXPECT_LT(test::rel_distance(got->output(out), want->output(out)), 2e-5);
    for (size_t k = 0; k < want->params().slots().size(); ++k)
      EXPECT_LT(test::rel_distance(got->params().grad(k), want->params().grad(k)), 2e-4)
          << want->params().slots()[k].name;
    expect_producers_layout_without_reorders(*got, s);
  }
}

// crest's dilated depthwise loops against the reference backend's convolution: outputs, every
// parameter gradient (the depthwise weights and bias among them) and, through the 1x1 before it,
// the input gradient; float32 tightly, bf16 against the reference's bf16 emulation.
TEST(OneDnnDepthwise, DilatedLoopsAgreeWithTheReferenceInEveryVariant) {
  CREST_SKIP_WITHOUT_BACKEND("onednn");
  auto reference = make_backend("reference");
  auto onednn = make_backend("onednn");
  const Separable variants[] = {
      {1, 2, 0, 3, true, 48},   // bias, three lane blocks
      {2, 2, 0, 3, false, 16},  // stride and dilation together
      {1, 1, 3, 3, true, 16},   // dilated along the width only
      {1, 2, 0, 5, false, 32},  // 5x5
      {1, 3, 0, 3, false, 32},  // padding 3: taps beyond the 10-wide input
  };
  for (const Separable& s : variants)
    for (const std::optional<DType> half : {std::optional<DType>(), std::optional(DType::bf16)}) {
      if (half) {
        CREST_CONTINUE_WITHOUT_DTYPE("onednn", *half);
      }
      SCOPED_TRACE(s.name() + (half ? " bf16" : " float32"));
      const Graph g = separable_graph(s);
      const auto want = step(g, *reference, half);
      const auto got = step(g, *onednn, half);
      const double tolerance = half ? 2e-2 : 2e-5;
      const ValueId out = g.outputs()[0];
      EXPECT_LT(test::rel_distance(got->output(out), want->output(out)), tolerance);
      for (size_t k = 0; k < want->params().slots().size(); ++k)
        EXPECT_LT(test::rel_distance(got->params().grad(k), want->params().grad(k)), 10 * tolerance)
            << want->params().slots()[k].name;
      expect_producers_layout_without_reorders(*got, s);
    }
}

}  // namespace
}  // namespace crest
