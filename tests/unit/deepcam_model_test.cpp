// The DeepCAM network (src/models/deepcam.cpp): the reference's parameters, keys and
// initialisation, any size that is a multiple of 16, and weight files in the reference's layout.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "crest/data/safetensors.hpp"
#include "crest/engine/weights.hpp"
#include "crest/graph/executor.hpp"
#include "crest/models/deepcam.hpp"
#include "crest/models/model_registry.hpp"
#include "support/cli_util.hpp"
#include "support/state_dict_entries.hpp"
#include "support/test_util.hpp"

namespace crest {
namespace {

namespace fs = std::filesystem;

DeepcamOptions small(int64_t h = 32, int64_t w = 48) {
  DeepcamOptions o;
  o.input_shape = {h, w, 16};
  return o;
}

struct Compiled {
  BuiltModel model;
  std::unique_ptr<Backend> backend = make_backend("reference");
  std::unique_ptr<Executor> ex;
  explicit Compiled(const DeepcamOptions& o, bool training = true) : model(build_deepcam(o)) {
    CompileOptions co;
    co.batch = 1;
    co.training = training;
    ex = std::make_unique<Executor>(model.graph, *backend, co);
  }
};

// One compiled 32x48 network shared by the tests that only read it (56 M parameters each).
Compiled& shared_model() {
  static Compiled c(small());
  return c;
}

// key -> "[shape] dtype", from the fixture the peer script wrote.
std::map<std::string, std::string> reference_entries() {
  return test::state_dict_entries("tests/fixtures/deepcam_state_dict_keys.txt");
}

using test::moments;

double max_abs(const ParamStore& p, const std::string& name) {
  const TensorView v = p.value(static_cast<size_t>(&test::slot_named(p, name) - p.slots().data()));
  double m = 0;
  for (int64_t i = 0; i < v.numel(); ++i)
    m = std::max(m, std::abs(test::element(v, static_cast<size_t>(i))));
  return m;
}

TEST(DeepcamModel, HasTheReferenceParameterCountAndShapes) {
  Compiled& c = shared_model();
  EXPECT_EQ(c.ex->params().parameter_count(), 56454720);
  int64_t state = 0;
  for (const auto& s : c.ex->params().slots())
    if (!s.spec.trainable) state += static_cast<int64_t>(s.count);
  EXPECT_EQ(state, 97760 + 76);  // running mean and variance, and one counter per batch norm
}

TEST(DeepcamModel, WeightFilesUseTheReferenceKeysShapesAndTypes) {
  Compiled& c = shared_model();
  const auto expected = reference_entries();
  ASSERT_EQ(expected.size(), 529u);
  EXPECT_EQ(test::written_entries(c.ex->params(), c.model, "crest_deepcam_keys.safetensors"),
            expected);
}

// model.width_divisor: 8 is the same network with every width of the reference divided by 8 —
// the same keys, and every dimension the reference's except the widths (the kernels' 1 and 3,
// the 3 classes and the 16 input channels stay).
TEST(DeepcamModel, AWidthDivisorDividesEveryWidthAndKeepsTheKeys) {
  DeepcamOptions o = small();
  o.width_divisor = 8;
  Compiled c(o);
  const std::map<std::string, std::string> written =
      test::written_entries(c.ex->params(), c.model, "crest_deepcam_reduced.safetensors");
  const std::set<int64_t> widths = {32, 48, 64, 128, 256, 304, 728, 1024, 1280, 1536, 2048};
  std::map<std::string, std::string> expected;
  for (const auto& [key, entry] : reference_entries()) {  // "[a, b, ...] dtype"
    std::istringstream in(entry.substr(1));
    std::string text = "[", dim;
    while (std::getline(in, dim, ',')) {
      const bool last = dim.find(']') != std::string::npos;
      const std::string digits = dim.substr(0, dim.find(']'));
      if (digits.find_first_of("0123456789") != std::string::npos) {
        const int64_t d = std::stoll(digits);
        text += (text.size() > 1 ? ", " : "") + std::to_string(widths.count(d) ? d / 8 : d);
      }
      if (last) {
        text += dim.substr(dim.find(']'));
        break;
      }
    }
    expected[key] = text;
  }
  ASSERT_EQ(expected.size(), 529u);
  EXPECT_EQ(written, expected);
  EXPECT_EQ(written.at("xception_features.block5.rep.0.conv1.weight"), "[91, 1, 3, 3] float32");
}

TEST(DeepcamModel, InitialisesEachModuleAsTheReference) {
  Compiled& c = shared_model();
  const ParamStore& p = c.ex->params();
  // Kaiming-normal (fan_in, gain sqrt 2) on the backbone, depthwise (fan_in 9) included, and on
  // the ASPP atrous branches.
  for (const auto& [name, fan_in] : std::vector<std::pair<std::string, double>>{
           {"xception_features.block5.rep.0.conv1.weight", 9},
           {"xception_features.block5.rep.0.pointwise.weight", 728},
           {"bottleneck.aspp2.atrous_convolution.weight", 2048 * 9}}) {
    const auto [mean, sd] = moments(p, name);
    EXPECT_NEAR(sd, std::sqrt(2 / fan_in), 0.05 * std::sqrt(2 / fan_in)) << name;
    EXPECT_NEAR(mean, 0, 0.05 * std::sqrt(2 / fan_in)) << name;
  }
  // PyTorch's default U(+-1/sqrt(fan_in)) elsewhere; a transposed conv's fan_in is out * k^2.
  for (const auto& [name, fan_in] :
       std::vector<std::pair<std::string, double>>{{"upsample.conv1.0.weight", 304 * 9},
                                                   {"upsample.conv1.6.bias", 256},
                                                   {"upsample.last_deconv.0.weight", 3 * 9},
                                                   {"bottleneck.conv.weight", 1280},
                                                   {"conv2.weight", 128}}) {
    const double bound = 1 / std::sqrt(fan_in);
    EXPECT_LE(max_abs(p, name), bound) << name;
    EXPECT_GT(max_abs(p, name), 0.9 * bound) << name;
  }
  const std::string bn = "xception_features.block7.rep.4.bn.";
  EXPECT_EQ(moments(p, bn + "weight"), std::make_pair(1.0, 0.0));
  EXPECT_EQ(moments(p, bn + "bias"), std::make_pair(0.0, 0.0));
  EXPECT_EQ(moments(p, bn + "running_var"), std::make_pair(1.0, 0.0));
  EXPECT_EQ(max_abs(p, "bottleneck.global_avg_pool.global_average_pool.2.bias"), 0.0);
}

TEST(DeepcamModel, RunsAtAnySizeThatIsAMultipleOf16) {
  for (const auto& [h, w] : std::vector<std::pair<int64_t, int64_t>>{{16, 16}, {48, 32}}) {
    Compiled c(small(h, w), /*training=*/false);
    test::fill_uniform(c.ex->input("x"), 1);
    const double loss = c.ex->forward(false);
    EXPECT_TRUE(std::isfinite(loss));
    const TensorView logits = c.ex->output(c.model.prediction);
    EXPECT_EQ(logits.shape(), Shape({1, 3, h, w}));
  }
}

// Expects the model section `a` refused for `key`, the message containing `text`.
void expect_refused(const Attributes& a, const std::string& key, const std::string& text) {
  try {
    find_model_kind("deepcam").canonical(a);
    FAIL() << "accepted " << key;
  } catch (const ModelKeyError& e) {
    EXPECT_EQ(e.key(), key);
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

TEST(DeepcamModel, RefusesSizesThatAreNotMultiplesOf16) {
  Attributes a;
  a.set("input_shape", std::vector<int64_t>{100, 144, 16});
  expect_refused(a, "input_shape", "multiples of 16");
  a = {};
  a.set("class_weights", std::vector<double>{1, 2});
  expect_refused(a, "class_weights", "expected 3 weights");
  a = {};
  a.set("width_divisor", int64_t{3});
  expect_refused(a, "width_divisor", "expected 1, 2, 4 or 8");
}

TEST(DeepcamModel, LoadsAReferenceCheckpointsDdpPrefixedKeys) {
  Compiled a(small()), b(small());
  const test::TempDir dir;  // a directory of its own: another suite may run beside this one
  const fs::path plain = dir.file("plain.safetensors"), ddp = dir.file("ddp.safetensors");
  // a's weights with one batch norm's statistics changed, re-keyed as a DDP state_dict.
  ParamStore& pa = a.ex->params();
  const auto& rv = test::slot_named(pa, "bn2.bn.running_var");
  pa.value(static_cast<size_t>(&rv - pa.slots().data())).as<float>()[5] = 3.5f;
  const auto& counter = test::slot_named(pa, "bn2.bn.num_batches_tracked");
  pa.value(static_cast<size_t>(&counter - pa.slots().data())).as<float>()[0] = 7;
  save_weights(pa, plain.string(), {}, a.model.external_params);
  {
    const SafetensorsFile f(plain.string());
    std::vector<SafetensorsEntry> entries;
    for (const auto& t : f.tensors())
      entries.push_back({"module." + t.name, *to_crest_dtype(t.dtype), t.crest_shape(), t.data});
    write_safetensors(ddp.string(), entries);
  }
  load_weights(b.ex->params(), ddp.string(), b.model.external_params);
  const ParamStore& pb = b.ex->params();
  for (size_t i = 0; i < pa.slots().size(); ++i)
    ASSERT_EQ(test::rel_distance(pb.value(i), pa.value(i)), 0.0) << pa.slots()[i].name;
  EXPECT_EQ(max_abs(pb, "bn2.bn.num_batches_tracked"), 7.0);
}

}  // namespace
}  // namespace crest
