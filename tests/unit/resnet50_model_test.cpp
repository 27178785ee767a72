// The ResNet-50 network (src/models/resnet50.cpp): torchvision's state_dict keys, shapes and
// initialisation, v1.5's stride on the 3x3, any size from 32 up, the reduced widths, and the
// model section's refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "crest/data/safetensors.hpp"
#include "crest/engine/weights.hpp"
#include "crest/graph/executor.hpp"
#include "crest/models/model_registry.hpp"
#include "crest/models/resnet50.hpp"
#include "support/state_dict_entries.hpp"
#include "support/test_util.hpp"

namespace crest {
namespace {

Resnet50Options at(int64_t h, int64_t w, int64_t classes = 1000, int64_t divisor = 1) {
  Resnet50Options o;
  o.input_shape = {h, w, 3};
  o.n_classes = classes;
  o.width_divisor = divisor;
  return o;
}

struct Compiled {
  BuiltModel model;
  std::unique_ptr<Backend> backend = make_backend("reference");
  std::unique_ptr<Executor> ex;
  explicit Compiled(const Resnet50Options& o, bool training = true) : model(build_resnet50(o)) {
    CompileOptions co;
    co.batch = 1;
    co.training = training;
    ex = std::make_unique<Executor>(model.graph, *backend, co);
  }
};

// The whole network at 32x32 (its parameters do not depend on the input size), compiled once.
Compiled& shared_model() {
  static Compiled c(at(32, 32));
  return c;
}

// key -> "[shape] dtype", as make_resnet50_parity.py --names wrote torchvision's state_dict.
std::map<std::string, std::string> torchvision_entries() {
  return test::state_dict_entries("tests/fixtures/resnet50_state_dict_keys.txt");
}

std::map<std::string, std::string> written_entries(const Compiled& c) {
  return test::written_entries(c.ex->params(), c.model, "crest_resnet50_keys.safetensors");
}

using test::moments;

TEST(Resnet50Model, HasTorchvisionsParameterCount) {
  const ParamStore& p = shared_model().ex->params();
  EXPECT_EQ(p.parameter_count(), 25557032);  // sum(p.numel() for p in resnet50().parameters())
  int64_t state = 0;
  for (const auto& s : p.slots())
    if (!s.spec.trainable) state += static_cast<int64_t>(s.count);
  EXPECT_EQ(state, 2 * 26560 + 53);  // running mean and variance, one counter per batch norm
}

TEST(Resnet50Model, WeightFilesUseTorchvisionsKeysShapesAndTypes) {
  const auto expected = torchvision_entries();
  ASSERT_EQ(expected.size(), 320u) << "tests/fixtures/resnet50_state_dict_keys.txt";
  EXPECT_EQ(written_entries(shared_model()), expected);
}

// Version 1.5: a projecting bottleneck strides on its 3x3 convolution and its downsample, never
// on its first 1x1 — visible in the shapes of every stage's first block.
TEST(Resnet50Model, StridesOnTheThreeByThreeConvolution) {
  Compiled c(at(64, 96), /*training=*/false);
  std::map<std::string, Shape> out;
  for (const OpFacts& op : c.ex->op_facts()) out[op.name] = op.out;
  EXPECT_EQ(out.at("maxpool"), Shape({1, 64, 16, 24}));
  EXPECT_EQ(out.at("layer2.0.conv1"), Shape({1, 128, 16, 24}));  // not strided
  EXPECT_EQ(out.at("layer2.0.conv2"), Shape({1, 128, 8, 12}));
  EXPECT_EQ(out.at("layer2.0.downsample.0"), Shape({1, 512, 8, 12}));
  EXPECT_EQ(out.at("layer4.2.conv3"), Shape({1, 2048, 2, 3}));
  EXPECT_EQ(out.at("fc"), Shape({1, 1000}));
}

TEST(Resnet50Model, InitialisesAsTorchvision) {
  const ParamStore& p = shared_model().ex->params();
  // He-normal in fan-out mode: std sqrt(2 / (out * k * k)).
  for (const auto& [name, fan_out] :
       std::vector<std::pair<std::string, double>>{{"conv1.weight", 64 * 49},
                                                   {"layer3.2.conv2.weight", 256 * 9},
                                                   {"layer4.0.downsample.0.weight", 2048},
                                                   {"layer1.0.conv3.weight", 256}}) {
    const auto [mean, sd] = moments(p, name);
    EXPECT_NEAR(sd, std::sqrt(2 / fan_out), 0.05 * std::sqrt(2 / fan_out)) << name;
    EXPECT_NEAR(mean, 0, 0.05 * std::sqrt(2 / fan_out)) << name;
  }
  // nn.Linear's default U(+-1/sqrt(2048)): std bound / sqrt(3).
  const double bound = 1 / std::sqrt(2048.0);
  EXPECT_NEAR(moments(p, "fc.weight").second, bound / std::sqrt(3.0), 0.02 * bound);
  EXPECT_EQ(moments(p, "layer2.3.bn3.weight"), std::make_pair(1.0, 0.0));
  EXPECT_EQ(moments(p, "layer2.3.bn3.bias"), std::make_pair(0.0, 0.0));
}

TEST(Resnet50Model, RunsAtAnySizeFrom32) {
  for (const auto& [h, w] : std::vector<std::pair<int64_t, int64_t>>{{32, 32}, {45, 67}}) {
    Compiled c(at(h, w, 10, 8), /*training=*/false);
    test::fill_uniform(c.ex->input("x"), 1);
    const TensorView y = c.ex->input("y");
    y.as<int32_t>()[0] = 7;
    EXPECT_TRUE(std::isfinite(c.ex->forward(false)));
    EXPECT_EQ(c.ex->output(c.model.prediction).shape(), Shape({1, 10}));
  }
}

TEST(Resnet50Model, AWidthDivisorDividesEveryWidthAndKeepsTheKeys) {
  Compiled c(at(32, 32, 1000, 4));
  const auto written = written_entries(c);
  EXPECT_EQ(written.size(), 320u);
  EXPECT_EQ(written.at("conv1.weight"), "[16, 3, 7, 7] float32");
  EXPECT_EQ(written.at("layer4.2.conv3.weight"), "[512, 128, 1, 1] float32");
  EXPECT_EQ(written.at("fc.weight"), "[1000, 512] float32");
}

// Expects the model section `a` refused for `key`, the message containing `text`.
void expect_refused(const Attributes& a, const std::string& key, const std::string& text) {
  try {
    find_model_kind("resnet50").canonical(a);
    FAIL() << "accepted " << key;
  } catch (const ModelKeyError& e) {
    EXPECT_EQ(e.key(), key);
    EXPECT_NE(e.message().find(text), std::string::npos) << e.message();
  }
}

TEST(Resnet50Model, RefusesImpossibleSections) {
  Attributes a;
  a.set("input_shape", std::vector<int64_t>{16, 224, 3});
  expect_refused(a, "input_shape", "[32, 65536]");
  a.set("input_shape", std::vector<int64_t>{224, 224});
  expect_refused(a, "input_shape", "[H, W, C]");
  Attributes d;
  d.set("width_divisor", int64_t{3});
  expect_refused(d, "width_divisor", "1, 2, 4 or 8");
  Attributes n;
  n.set("n_classes", int64_t{1});
  expect_refused(n, "n_classes", "2 to");
  Attributes s;
  s.set("label_smoothing", 1.0);
  expect_refused(s, "label_smoothing", "[0, 1)");
  Attributes u;
  u.set("depth", int64_t{101});
  expect_refused(u, "depth", "unknown key");
  const Attributes defaults = find_model_kind("resnet50").canonical(Attributes{});
  EXPECT_EQ(resnet50_options(defaults).label_smoothing, 0.1);
  EXPECT_EQ(resnet50_options(defaults).n_classes, 1000);
}

}  // namespace
}  // namespace crest
