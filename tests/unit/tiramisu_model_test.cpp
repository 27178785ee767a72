// The Tiramisu network (src/models/tiramisu.cpp): the PyTorch peer's state_dict keys and shapes
// (tests/fixtures/tiramisu_torch.py), the reference's parameter count, channel counts and
// resolutions along the paths, he_uniform initialisation, the batch-norm option, and the model
// section's refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>

#include "crest/graph/executor.hpp"
#include "crest/models/model_registry.hpp"
#include "crest/models/tiramisu.hpp"
#include "support/state_dict_entries.hpp"
#include "support/test_util.hpp"

namespace crest {
namespace {

TiramisuOptions at(int64_t h, int64_t w) {
  TiramisuOptions o;
  o.input_shape = {h, w, 16};
  return o;
}

struct Compiled {
  BuiltModel model;
  std::unique_ptr<Backend> backend = make_backend("reference");
  std::unique_ptr<Executor> ex;
  explicit Compiled(const TiramisuOptions& o, bool training = true) : model(build_tiramisu(o)) {
    CompileOptions co;
    co.batch = 1;
    co.training = training;
    ex = std::make_unique<Executor>(model.graph, *backend, co);
  }
};

// The whole network at its smallest size, 16x16 (its parameters do not depend on the size).
Compiled& shared_model() {
  static Compiled c(at(16, 16));
  return c;
}

std::map<std::string, std::string> written_entries(const Compiled& c) {
  return test::written_entries(c.ex->params(), c.model, "crest_tiramisu_keys.safetensors");
}

TEST(TiramisuModel, HasThePeersParameterCount) {
  // sum(p.numel() for p in Tiramisu().parameters()): 7.5 M, the reference's --blocks 2 2 2 4 5
  // --growth 32 --filter-sz 5 less the unused fifth transition down.
  EXPECT_EQ(shared_model().ex->params().parameter_count(), 7504835);
}

TEST(TiramisuModel, WeightFilesUseThePeersKeysAndShapes) {
  const auto expected = test::state_dict_entries("tests/fixtures/tiramisu_state_dict_keys.txt");
  ASSERT_EQ(expected.size(), 70u) << "tests/fixtures/tiramisu_state_dict_keys.txt";
  EXPECT_EQ(written_entries(shared_model()), expected);
}

// Channels and sizes along the paths: a dense block adds blocks[i] x 32 channels, a transition
// down halves the size keeping the channels, a transition up doubles it exactly over the new
// features alone (5 x 32 = 160 from the bottleneck), and the skip joins after it.
TEST(TiramisuModel, ChannelsAndSizesFollowTheReference) {
  Compiled c(at(64, 96), /*training=*/false);
  std::map<std::string, Shape> out;
  for (const OpFacts& op : c.ex->op_facts()) out[op.name] = op.out;
  EXPECT_EQ(out.at("conv_input.conv"), Shape({1, 64, 64, 96}));
  EXPECT_EQ(out.at("down_blocks.0.layers.1.concat"), Shape({1, 128, 64, 96}));
  EXPECT_EQ(out.at("transitions_down.0.conv"), Shape({1, 128, 32, 48}));
  EXPECT_EQ(out.at("down_blocks.3.layers.3.concat"), Shape({1, 384, 8, 12}));
  EXPECT_EQ(out.at("down_blocks.4.layers.4.concat"), Shape({1, 544, 4, 6}));
  EXPECT_EQ(out.at("transitions_up.0.conv"), Shape({1, 160, 8, 12}));
  EXPECT_EQ(out.at("up_blocks.0.skip"), Shape({1, 544, 8, 12}));
  EXPECT_EQ(out.at("transitions_up.1.conv"), Shape({1, 128, 16, 24}));
  EXPECT_EQ(out.at("up_blocks.3.layers.1.concat"), Shape({1, 256, 64, 96}));
  EXPECT_EQ(out.at("conv_output"), Shape({1, 3, 64, 96}));
  EXPECT_EQ(out.count("transitions_down.4.conv"), 0u);  // the reference's unused one
}

TEST(TiramisuModel, InitialisesAsKerasHeUniform) {
  const ParamStore& p = shared_model().ex->params();
  // U(+-sqrt(6 / fan_in)): std sqrt(2 / fan_in). A transposed conv's fan_in is out * k^2.
  for (const auto& [name, fan_in] :
       std::vector<std::pair<std::string, double>>{{"conv_input.conv.weight", 16 * 25},
                                                   {"down_blocks.4.layers.2.conv.weight", 448 * 25},
                                                   {"transitions_down.1.conv.weight", 192},
                                                   {"transitions_up.0.conv.weight", 160 * 9},
                                                   {"conv_output.weight", 256}}) {
    const auto [mean, sd] = test::moments(p, name);
    EXPECT_NEAR(sd, std::sqrt(2 / fan_in), 0.05 * std::sqrt(2 / fan_in)) << name;
    EXPECT_NEAR(mean, 0, 0.05 * std::sqrt(2 / fan_in)) << name;
  }
  EXPECT_EQ(test::moments(p, "up_blocks.1.layers.0.conv.bias"), std::make_pair(0.0, 0.0));
}

// The reference's loss weights: 1/f of 0.991, 0.0266, 0.13 normalised, as numpy computes them.
TEST(TiramisuModel, ReferenceClassWeights) {
  const std::vector<float> w = tiramisu_reference_class_weights();
  ASSERT_EQ(w.size(), 3u);
  EXPECT_FLOAT_EQ(w[0], 0.021796599f);
  EXPECT_FLOAT_EQ(w[1], 0.81204623f);
  EXPECT_FLOAT_EQ(w[2], 0.16615716f);
}

// batch_norm: true puts one after every conv but the transitions up and the output (30), with
// PyTorch's names and int64 counters.
TEST(TiramisuModel, TheBatchNormOptionAddsThirtyNamedAsThePeer) {
  TiramisuOptions o = at(16, 16);
  o.batch_norm = true;
  Compiled c(o);
  const auto written = written_entries(c);
  EXPECT_EQ(written.size(), 70u + 30 * 5);
  EXPECT_EQ(written.at("down_blocks.2.layers.1.bn.weight"), "[32] float32");
  EXPECT_EQ(written.at("transitions_down.3.bn.running_var"), "[384] float32");
  EXPECT_EQ(written.at("conv_input.bn.num_batches_tracked"), "[] int64");
  EXPECT_EQ(c.ex->params().parameter_count(), 7508483);
}

void expect_refused(const Attributes& a, const std::string& key, const std::string& text) {
  try {
    find_model_kind("tiramisu").canonical(a);
    FAIL() << "accepted " << key;
  } catch (const ModelKeyError& e) {
    EXPECT_EQ(e.key(), key);
    EXPECT_NE(e.message().find(text), std::string::npos) << e.message();
  }
}

TEST(TiramisuModel, RefusesImpossibleSections) {
  Attributes a;
  a.set("input_shape", std::vector<int64_t>{24, 1152, 16});  // 16 = 2^4 for five blocks
  expect_refused(a, "input_shape", "multiples of 16");
  a.set("blocks", std::vector<int64_t>{2, 2, 2, 4});  // 8 for four: 24 passes
  EXPECT_NO_THROW(find_model_kind("tiramisu").canonical(a));
  Attributes b;
  b.set("blocks", std::vector<int64_t>{});
  expect_refused(b, "blocks", "1 to 8");
  b.set("blocks", std::vector<int64_t>{2, 0, 3});
  expect_refused(b, "blocks", "1 to 256 layers");
  Attributes f;
  f.set("filter_size", int64_t{4});
  expect_refused(f, "filter_size", "odd");
  Attributes d;
  d.set("dropout", 1.0);
  expect_refused(d, "dropout", "[0, 1)");
  Attributes w;
  w.set("class_weights", std::vector<double>{1, 0, 1});
  expect_refused(w, "class_weights", "positive");
  w.set("class_weights", std::vector<double>{1, 1});
  expect_refused(w, "class_weights", "3 weights");
  Attributes s;
  s.set("loss_scale", 0.0);
  expect_refused(s, "loss_scale", "positive");
  const TiramisuOptions defaults =
      tiramisu_options(find_model_kind("tiramisu").canonical(Attributes{}));
  EXPECT_EQ(defaults.blocks, std::vector<int64_t>({2, 2, 2, 4, 5}));
  EXPECT_EQ(defaults.loss_scale, 0.1);
  EXPECT_EQ(defaults.class_weights, tiramisu_reference_class_weights());
}

}  // namespace
}  // namespace crest
