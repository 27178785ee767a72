// data.name: deepcam in run configs: the reference's argument names (data_dir_prefix, channels),
// the sample shape and its checks, the model's inputs following the channel selection, the IoU
// task defaults, and errors that name the key.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "crest/core/error.hpp"
#include "crest/train/config.hpp"

namespace crest {
namespace {

// A small segmentation graph over 3 selected channels of 32x48 samples.
std::string graph_config(const std::string& data_extra = "", const std::string& x_decl = "",
                         const std::string& y_decl = "", const std::string& train = "") {
  return "data:\n  name: deepcam\n  data_dir_prefix: /data/deepcam\n  batch_size: 2\n"
         "  n_epochs: 1\n  sample_shape: [32, 48, 16]\n  channels: [0, 5, 7]\n" +
         data_extra + "model:\n  name: graph\n  inputs:\n    - " +
         (x_decl.empty() ? "{name: x, shape: [3, 32, 48], layout: channels_last}" : x_decl) +
         "\n    - " + (y_decl.empty() ? "{name: y, shape: [32, 48], integer: true}" : y_decl) +
         "\n  layers:\n    - {name: logits, kind: conv, out_channels: 3, kernel: [3, 3], same: "
         "true}\n    - {name: loss, kind: softmax_cross_entropy, class_weights: [1, 2, 3], "
         "inputs: [logits, y]}\n  outputs: [logits]\n  loss: loss\n"
         "optimizer: {name: Adam, lr: 0.01}\n" +
         (train.empty() ? "" : "train:\n" + train);
}

std::string error_of(const std::string& text, const std::vector<std::string>& overrides = {}) {
  try {
    load_config_text(text, "cam.yaml", overrides);
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

TEST(DeepcamConfig, ReferenceNamesDefaultsAndTheIouTask) {
  const Config c = load_config_text(graph_config(), "cam.yaml");
  EXPECT_EQ(c.data.name, "deepcam");
  EXPECT_EQ(c.data.data_dir, "/data/deepcam");  // data_dir_prefix is data_dir
  EXPECT_EQ(c.data.format, SampleFileFormat::hdf5);
  EXPECT_EQ(c.data.sample_shape, (Shape{32, 48, 16}));
  EXPECT_EQ(c.data.channels, (std::vector<int64_t>{0, 5, 7}));
  EXPECT_EQ(c.data.model_sample_shape(), (Shape{32, 48, 3}));
  EXPECT_EQ(c.data.target_shape, (Shape{32, 48}));  // the labels
  EXPECT_EQ(c.data.n_train, kEverySample);
  EXPECT_EQ(c.data.n_valid, kEverySample);
  EXPECT_EQ(c.train.metrics, std::vector<std::string>{"iou"});
  // The resolved YAML loads back to the same configuration.
  const Config again = load_config_text(c.resolved_yaml, "resolved.yaml");
  EXPECT_EQ(again.data.data_dir, c.data.data_dir);
  EXPECT_EQ(again.data.channels, c.data.channels);
  EXPECT_EQ(again.data.n_valid, kEverySample);
  EXPECT_EQ(again.train.metrics, c.train.metrics);
  EXPECT_EQ(again.resolved_yaml.substr(again.resolved_yaml.find("output_dir")),
            c.resolved_yaml.substr(c.resolved_yaml.find("output_dir")));
}

TEST(DeepcamConfig, EveryChannelByDefaultAndTheReferenceSampleSize) {
  const std::string text =
      "data: {name: deepcam, data_dir: /d, batch_size: 2, n_epochs: 1, n_train: 8, n_valid: 0}\n"
      "model:\n  name: graph\n  inputs:\n"
      "    - {name: x, shape: [16, 768, 1152], layout: channels_last}\n"
      "    - {name: y, shape: [768, 1152], integer: true}\n"
      "  layers: [{name: l, kind: conv, out_channels: 3, kernel: [1, 1]},\n"
      "           {name: loss, kind: softmax_cross_entropy, inputs: [l, y]}]\n"
      "  outputs: [l]\n  loss: loss\noptimizer: {name: Adam}\n";
  const Config c = load_config_text(text, "cam.yaml");
  EXPECT_EQ(c.data.sample_shape, (Shape{768, 1152, 16}));
  EXPECT_EQ(c.data.channels.size(), 16u);
  EXPECT_EQ(c.data.channels.back(), 15);
  EXPECT_EQ(c.data.n_train, 8);
  EXPECT_EQ(c.data.n_valid, 0);  // no validation, as asked
}

TEST(DeepcamConfig, TargetIouIsAHigherIsBetterTarget) {
  const Config c = load_config_text(graph_config("", "", "", "  target_iou: 0.82\n"), "cam.yaml");
  ASSERT_TRUE(c.train.target_iou);
  EXPECT_DOUBLE_EQ(*c.train.target_iou, 0.82);
  EXPECT_NE(c.resolved_yaml.find("target_iou: 0.82"), std::string::npos) << c.resolved_yaml;
  std::string e = error_of(graph_config("", "", "", "  target_iou: 1.5\n"));
  EXPECT_NE(e.find("train.target_iou"), std::string::npos) << e;
  e = error_of(graph_config("", "", "", "  target_iou: 0.8\n  target_mae: 0.1\n"));
  EXPECT_NE(e.find("one quality target"), std::string::npos) << e;
}

TEST(DeepcamConfig, AChannelThatDoesNotExistNamesItsIndex) {
  const std::string e = error_of(graph_config(), {"data.channels=[0, 16, 2]"});
  EXPECT_NE(e.find("data.channels[1]"), std::string::npos) << e;
  EXPECT_NE(e.find("channel 16 does not exist"), std::string::npos) << e;
}

TEST(DeepcamConfig, HeightAndWidthMustBeMultiplesOf16) {
  const std::string e = error_of(graph_config(), {"data.sample_shape=[40, 48, 16]"});
  EXPECT_NE(e.find("data.sample_shape"), std::string::npos) << e;
  EXPECT_NE(e.find("multiples of 16"), std::string::npos) << e;
  EXPECT_NE(error_of(graph_config(), {"data.sample_shape=[32, 48]"}).find("3 entries [H, W, C]"),
            std::string::npos);
}

TEST(DeepcamConfig, TheModelInputsMustTakeTheSelectedChannelsAndTheLabels) {
  // Four channels declared, three selected.
  std::string e =
      error_of(graph_config("", "{name: x, shape: [4, 32, 48], layout: channels_last}"));
  EXPECT_NE(e.find("data.channels"), std::string::npos) << e;
  EXPECT_NE(e.find("[3, 32, 48]"), std::string::npos) << e;
  // Channels-first input: the loader never transposes.
  e = error_of(graph_config("", "{name: x, shape: [3, 32, 48]}"));
  EXPECT_NE(e.find("model.inputs"), std::string::npos) << e;
  EXPECT_NE(e.find("channels_last"), std::string::npos) << e;
  // Float targets: DeepCAM's are int32 labels.
  e = error_of(graph_config("", "", "{name: y, shape: [32, 48]}"));
  EXPECT_NE(e.find("model.inputs"), std::string::npos) << e;
  EXPECT_NE(e.find("integer: true"), std::string::npos) << e;
}

TEST(DeepcamConfig, CosmoflowKeysAndFormatsAreRefused) {
  std::string e = error_of(graph_config("  compression: GZIP\n"));
  EXPECT_NE(e.find("data.compression"), std::string::npos) << e;
  e = error_of(graph_config("  format: tfrecord\n"));
  EXPECT_NE(e.find("data.format"), std::string::npos) << e;
  e = error_of(graph_config("  apply_log: true\n"));
  EXPECT_NE(e.find("data.apply_log"), std::string::npos) << e;
  e = error_of(graph_config(), {"data.data_dir_prefix=null"});
  EXPECT_NE(e.find("data.data_dir"), std::string::npos) << e;
  EXPECT_NE(e.find("stats.h5"), std::string::npos) << e;
  e = error_of(graph_config("  data_dir: /other\n"));
  EXPECT_NE(e.find("give one"), std::string::npos) << e;
  // And DeepCAM's keys on CosmoFlow data.
  e = error_of(
      "data: {name: dummy, n_train: 8, sample_shape: [32, 32, 32, 4], batch_size: 4, "
      "n_epochs: 1, channels: [0]}\nmodel: {name: cosmoflow}\noptimizer: {name: SGD}\n");
  EXPECT_NE(e.find("data.channels"), std::string::npos) << e;
}

TEST(DeepcamConfig, NpyFormatIsKept) {
  const Config c = load_config_text(graph_config("  format: npy\n"), "cam.yaml");
  EXPECT_EQ(c.data.format, SampleFileFormat::npy);
}

}  // namespace
}  // namespace crest
