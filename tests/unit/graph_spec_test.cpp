// The graph is a specification: registered kinds with canonical attributes, a plain value that
// compile() never changes, so one graph compiles any number of times (train and eval batch
// sizes, another backend) and bad nodes are refused when they are added, naming node and key.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "crest/core/error.hpp"
#include "crest/graph/executor.hpp"
#include "crest/layers/activation.hpp"
#include "crest/layers/conv.hpp"
#include "crest/layers/loss.hpp"
#include "crest/models/cosmoflow.hpp"
#include "support/host_backends.hpp"
#include "support/small_models.hpp"
#include "support/test_util.hpp"

namespace crest {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

class GraphCompilesTwice : public ::testing::TestWithParam<std::string> {};

// Train at batch 4, evaluate at batch 2, from one graph: the eval program, given the train
// program's weights, predicts what the train program predicts for the same samples.
TEST_P(GraphCompilesTwice, TrainAndEvalBatchesAgree) {
  auto backend = make_backend(GetParam());
  const CosmoFlowModel m = build_cosmoflow(test::small_cosmoflow(32, 4, /*dropout=*/0.5));
  const Graph before = m.graph;
  CompileOptions train_opts;
  train_opts.batch = 4;
  train_opts.seed = 3;
  CompileOptions eval_opts = train_opts;
  eval_opts.batch = 2;
  eval_opts.training = false;
  Executor train(m.graph, *backend, train_opts);
  Executor eval(m.graph, *backend, eval_opts);
  EXPECT_EQ(m.graph, before) << "compiling changed the graph";
  ASSERT_EQ(train.params().bytes(), eval.params().bytes());
  // Same seed, same graph: the same initial weights without copying.
  EXPECT_EQ(std::memcmp(train.params().values(), eval.params().values(), train.params().bytes()),
            0);

  test::fill_uniform(train.input("x"), 5, 0, 3);
  test::fill_uniform(train.input("y"), 6);
  train.forward();
  train.backward();  // the programs share no memory: training state leaves eval untouched
  train.forward(/*training=*/false);
  const TensorView x4 = train.input("x"), x2 = eval.input("x");
  std::memcpy(x2.data(), static_cast<const char*>(x4.data()) + x4.bytes() / 2, x2.bytes());
  eval.forward();
  const TensorView p4 = train.output(m.prediction), p2 = eval.output(m.prediction);
  ASSERT_EQ(p2.numel() * 2, p4.numel());
  for (int64_t i = 0; i < p2.numel(); ++i)
    EXPECT_NEAR(p2.as<float>()[i], p4.as<float>()[i + p2.numel()], 1e-5) << i;
}

INSTANTIATE_TEST_SUITE_P(Backends, GraphCompilesTwice,
                         ::testing::ValuesIn(crest::test::host_backend_names()));

TEST(GraphSpec, CopiesCompareEqualAndCompileAlike) {
  const test::SmallModel m = test::branchy_model(0.25f);
  Graph copy = m.graph;
  EXPECT_EQ(copy, m.graph);
  auto backend = make_backend("reference");
  CompileOptions c;
  c.batch = 2;
  Executor a(m.graph, *backend, c), b(copy, *backend, c);
  EXPECT_EQ(a.summary(), b.summary());
  copy.add("extra", layers::relu(), {copy.output_of("scale")});
  EXPECT_FALSE(copy == m.graph);
}

TEST(GraphSpec, AttributesAreCanonical) {
  // Defaults are filled in when the node is added, so a node written with few attributes equals
  // one written with all of them.
  Graph a, b;
  const ValueId xa = a.input("x", Shape{2, 8, 8}), xb = b.input("x", Shape{2, 8, 8});
  a.add("c",
        LayerSpec{"conv",
                  [] {
                    Attributes at;
                    at.set("out_channels", int64_t{3});
                    at.set("kernel", std::vector<int64_t>{3, 3});
                    return at;
                  }()},
        {xa});
  ConvOptions o;
  o.out_channels = 3;
  o.kernel = {3, 3};
  b.add("c", layers::conv(o), {xb});
  EXPECT_EQ(a, b);
  const Attributes& attrs = a.nodes()[0].layer.attrs;
  ASSERT_NE(attrs.find("groups"), nullptr);
  EXPECT_EQ(attr_text(*attrs.find("init")), "glorot_uniform");
  // An integer is accepted where a number is wanted, and stored as a number.
  Graph c;
  c.add("act",
        LayerSpec{"leaky_relu",
                  [] {
                    Attributes at;
                    at.set("negative_slope", int64_t{1});
                    return at;
                  }()},
        {c.input("x", Shape{4})});
  EXPECT_EQ(attr_type_of(*c.nodes()[0].layer.attrs.find("negative_slope")), AttrType::number);
}

TEST(GraphSpec, BadNodesNameTheNodeAndTheKey) {
  Graph g;
  const ValueId x = g.input("x", Shape{2, 8, 8});
  auto with = [](const std::string& key, AttrValue v) {
    Attributes a;
    a.set("out_channels", int64_t{2});
    a.set("kernel", std::vector<int64_t>{3, 3});
    a.set(key, std::move(v));
    return a;
  };
  std::string e = error_of([&] { g.add("c1", LayerSpec{"convolution", {}}, {x}); });
  EXPECT_NE(e.find("layer 'c1'"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown layer kind 'convolution'"), std::string::npos) << e;
  EXPECT_NE(e.find("conv_transpose"), std::string::npos) << e;  // lists what exists

  e = error_of([&] { g.add("c2", LayerSpec{"conv", with("kernal", int64_t{3})}, {x}); });
  EXPECT_NE(e.find("layer 'c2' (conv)"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown attribute 'kernal'"), std::string::npos) << e;

  e = error_of([&] { g.add("c3", LayerSpec{"conv", with("groups", std::string("two"))}, {x}); });
  EXPECT_NE(e.find("attribute 'groups' must be an integer"), std::string::npos) << e;

  e = error_of([&] { g.add("c4", LayerSpec{"conv", with("init", std::string("he"))}, {x}); });
  EXPECT_NE(e.find("init: unknown value 'he'"), std::string::npos) << e;
  EXPECT_NE(e.find("kaiming_normal"), std::string::npos) << e;

  // The layer's own checks run when the node is added, not at compile time.
  e = error_of([&] {
    g.add("c5", LayerSpec{"conv", with("stride", std::vector<int64_t>{0})}, {x});
  });
  EXPECT_NE(e.find("layer 'c5' (conv)"), std::string::npos) << e;

  e = error_of([&] { g.add("x", layers::relu(), {x}); });
  EXPECT_NE(e.find("name of a graph input"), std::string::npos) << e;
  EXPECT_TRUE(g.nodes().empty()) << "a refused node must not be added";
}

// Backward starts at the loss layer: a value computed from its output (a scaled loss) cannot be
// the loss, or training would report one number and follow the gradient of another.
TEST(GraphSpec, TheLossMustBeALossLayersOwnOutput) {
  Graph g;
  const ValueId x = g.input("x", Shape{3}), y = g.input("y", Shape{3});
  const ValueId mse = g.add("mse", layers::mse_loss(), {x, y});
  g.set_loss(g.add("scaled", layers::scale(0.1f), {mse}));
  auto backend = make_backend("reference");
  CompileOptions co;
  co.batch = 2;
  const std::string e = error_of([&] { Executor ex(g, *backend, co); });
  EXPECT_NE(e.find("not a value computed from it"), std::string::npos) << e;
}

TEST(GraphSpec, EveryLayerKindIsRegistered) {
  const auto names = layer_kind_names();
  for (const char* k : {"conv", "conv_transpose", "max_pool", "avg_pool", "global_avg_pool", "relu",
                        "leaky_relu", "tanh", "sigmoid", "scale", "dense", "add", "dropout",
                        "mse_loss", "softmax_cross_entropy", "flatten", "concat"})
    EXPECT_NE(std::find(names.begin(), names.end(), k), names.end()) << k;
}

}  // namespace
}  // namespace crest
