// The model registry: `model.name` names a registered model, whose own field table declares, checks
// and prints the section's keys; build_model goes through it.
#include "crest/models/model_registry.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "crest/core/error.hpp"
#include "crest/models/cosmoflow.hpp"
#include "crest/train/config.hpp"
#include "crest/train/trainer.hpp"

namespace crest {
namespace {

const char* kHead = R"(data: {name: dummy, n_train: 8, sample_shape: [32, 32, 32, 4], batch_size: 4,
       n_epochs: 1}
optimizer: {name: SGD}
model:
  name: cosmoflow
)";

// Loading kHead plus `model_lines` must fail with exit code 2 and every needle in the message.
void expect_error(const std::string& model_lines, const std::vector<std::string>& needles) {
  SCOPED_TRACE(model_lines);
  try {
    load_config_text(std::string(kHead) + model_lines, "m.yaml");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2) << e.what();
    for (const auto& n : needles)
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what() << "\nmissing " << n;
  }
}

TEST(ModelRegistry, CosmoFlowIsRegisteredWithTheReferenceKeys) {
  const auto names = model_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "cosmoflow"), names.end());
  std::vector<std::string> keys;
  for (const auto& k : find_model_kind("cosmoflow").keys) keys.push_back(k.key);
  EXPECT_EQ(keys, (std::vector<std::string>{"input_shape", "kernel_size", "target_size",
                                            "conv_size", "n_conv_layers", "fc1_size", "fc2_size",
                                            "hidden_activation", "pooling_type", "dropout", "l2"}));
}

TEST(ModelRegistry, UnknownModelListsTheRegisteredOnes) {
  try {
    find_model_kind("alexnet");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cosmoflow"), std::string::npos) << e.what();
  }
  std::string text = kHead;
  text.replace(text.find("name: cosmoflow"), 15, "name: alexnet");
  try {
    load_config_text(text, "m.yaml");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(e.exit_code(), 2);
    EXPECT_NE(m.find("m.yaml:5: model.name"), std::string::npos) << m;
    EXPECT_NE(m.find("registered: cosmoflow"), std::string::npos) << m;
  }
}

TEST(ModelRegistry, SectionKeysAreCheckedByTheModelWithFileLineAndKey) {
  expect_error("  conv_size: 0\n", {"m.yaml:6: model.conv_size", "positive"});
  expect_error("  n_conv_layers: 21\n", {"m.yaml:6: model.n_conv_layers", "too large"});
  expect_error("  hidden_activation: Swish\n",
               {"m.yaml:6: model.hidden_activation", "LeakyReLU, ReLU, Tanh"});
  expect_error("  fc1_size: [1]\n", {"m.yaml:6: model.fc1_size", "integer"});
  expect_error("  input_shape: 32\n", {"m.yaml:6: model.input_shape", "list"});
  // A key the model does not declare, with the model's closest key.
  expect_error("  fc3_size: 8\n", {"m.yaml:6: model.fc3_size", "unknown key", "fc1_size"});
  // Graph keys belong to a model given as layers.
  expect_error("  outputs: [x]\n", {"model.outputs", "model.layers"});
}

TEST(ModelRegistry, GraphNameNeedsLayersAndLayersTakeNoModelKeys) {
  std::string text = kHead;
  text.replace(text.find("name: cosmoflow"), 15, "name: graph");
  EXPECT_THROW(load_config_text(text, "m.yaml"), Error);
  try {
    load_config_text(text, "m.yaml");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.layers"), std::string::npos) << e.what();
  }
}

TEST(ModelRegistry, BuildModelBuildsTheRegisteredModelFromItsSection) {
  const Config c =
      load_config_text(std::string(kHead) + "  conv_size: 4\n  n_conv_layers: 2\n", "m.yaml");
  const BuiltModel built = build_model(c.model);
  CosmoFlowOptions o;
  o.input_shape = {32, 32, 32, 4};
  o.conv_size = 4;
  o.n_conv_layers = 2;
  o.dropout = 0.5;  // the reference's default, which the section fills in
  const CosmoFlowModel direct = build_cosmoflow(o);
  EXPECT_EQ(built.graph, direct.graph);
  EXPECT_EQ(built.prediction, direct.prediction);
  EXPECT_EQ(built.loss, direct.loss);
  // A hand-made section is completed with the defaults.
  ModelConfig m;
  m.name = "cosmoflow";
  m.attrs.set("input_shape", std::vector<int64_t>{32, 32, 32, 4});
  m.attrs.set("conv_size", int64_t{4});
  m.attrs.set("n_conv_layers", int64_t{2});
  EXPECT_EQ(build_model(m).graph, direct.graph);
}

}  // namespace
}  // namespace crest
