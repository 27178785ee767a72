// expand_as beyond the op table's gradient check and agreement: the values it writes and the
// shapes it refuses.
#include <gtest/gtest.h>

#include "crest/core/error.hpp"
#include "crest/graph/executor.hpp"
#include "crest/layers/activation.hpp"
#include "crest/layers/conv.hpp"
#include "crest/layers/loss.hpp"
#include "crest/layers/pool.hpp"
#include "crest/layers/shape_ops.hpp"
#include "support/host_backends.hpp"
#include "support/test_util.hpp"

namespace crest {
namespace {

TEST(ExpandAs, BroadcastsOverTheReferencesSpatialSize) {
  Graph g;
  const ValueId x = g.input("x", Shape{3, 1, 1});
  const ValueId ref = g.input("ref", Shape{5, 2, 4});
  g.mark_output(g.add("expand", layers::expand_as(), {x, ref}));
  for (const std::string& name : crest::test::host_backend_names()) {
    SCOPED_TRACE(name);
    auto backend = make_backend(name);
    CompileOptions o;
    o.batch = 2;
    Executor ex(g, *backend, o);
    for (int64_t i = 0; i < 6; ++i) ex.input("x").as<float>()[i] = static_cast<float>(i + 1);
    ex.forward();
    const TensorView y = ex.output(g.output_of("expand"));
    EXPECT_EQ(y.shape(), (Shape{2, 3, 2, 4}));
    for (int64_t i = 0; i < y.numel(); ++i) {
      const int64_t row = i / 8;  // (sample, channel): x's element row + 1, repeated 2 x 4 times
      EXPECT_EQ(y.as<float>()[i], static_cast<float>(row + 1)) << i;
    }
  }
}

TEST(ExpandAs, RejectsShapesItCannotBroadcast) {
  auto error = [](const Shape& x, const Shape& ref) -> std::string {
    Graph g;
    g.mark_output(g.add("expand", layers::expand_as(), {g.input("x", x), g.input("ref", ref)}));
    auto backend = make_backend("reference");
    try {
      Executor ex(g, *backend, CompileOptions{});
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error(Shape{3, 2, 1}, Shape{5, 2, 4}).find("spatial size 1"), std::string::npos);
  EXPECT_NE(error(Shape{3, 1}, Shape{5, 2, 4}).find("same rank"), std::string::npos);
  EXPECT_NE(error(Shape{3, 2, 1}, Shape{5, 2, 4}).find("layer 'expand'"), std::string::npos);
  EXPECT_EQ(error(Shape{3, 1, 1, 1}, Shape{5, 2, 4, 3}), "");
  EXPECT_EQ(error(Shape{3, 1, 1}, Shape{5, 2, 4}), "") << "[N, 3, 1, 1] and [N, 5, 2, 4]";
}

// DeepLabv3+'s image pooling: features -> global average pool -> 1x1 conv -> relu -> expanded to
// the features' size -> concatenated with them. The features reach expand_as in oneDNN's blocked
// layout; on every backend the loss and gradients agree with the reference's.
TEST(ExpandAs, ImagePoolingBranchAgreesAcrossBackends) {
  Graph g;
  const ValueId x = g.input("x", Shape{16, 6, 5});
  const ValueId target = g.input("target", Shape{24, 6, 5});
  ConvOptions c;
  c.out_channels = 16;
  c.kernel = {3, 3};
  c.padding = {1};
  const ValueId features = g.add("features", layers::conv(c), {x});
  PoolOptions p;
  p.kind = PoolKind::avg_include_pad;
  p.global = true;
  ValueId pooled = g.add("pool", layers::pool(p), {features});
  c.out_channels = 8;
  c.kernel = {1, 1};
  c.padding = {0};
  pooled = g.add("pool_conv", layers::conv(c), {pooled});
  pooled = g.add("pool_relu", layers::relu(), {pooled});
  const ValueId expanded = g.add("expand", layers::expand_as(), {pooled, features});
  const ValueId out = g.add("concat", layers::concat(), {features, expanded});
  g.mark_output(out);
  g.set_loss(g.add("loss", layers::mse_loss(), {out, target}));
  CompileOptions o;
  o.batch = 2;
  o.seed = 4;
  auto run = [&](Backend& b) {
    auto ex = std::make_unique<Executor>(g, b, o);
    test::fill_uniform(ex->input("x"), 1);
    test::fill_uniform(ex->input("target"), 2);
    ex->forward();
    ex->backward();
    return ex;
  };
  auto reference = make_backend("reference");
  const auto want = run(*reference);
  for (const std::string& name : crest::test::host_backend_names()) {
    if (name == "reference") continue;
    auto backend = make_backend(name);
    const auto got = run(*backend);
    EXPECT_LT(test::rel_distance(got->output(out), want->output(out)), 2e-5) << name;
    for (size_t s = 0; s < want->params().slots().size(); ++s)
      EXPECT_LT(test::rel_distance(got->params().grad(s), want->params().grad(s)), 2e-4)
          << name << " " << want->params().slots()[s].name;
  }
}

}  // namespace
}  // namespace crest
