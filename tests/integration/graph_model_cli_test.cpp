// A network given as layers in a run config (model.name: graph): it trains, its run directory's
// config.yaml carries the graph so --resume rebuilds it, the demo written as a graph is the demo's
// network, and a bad model section exits 2 naming the key, without writing anything.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "support/cli_util.hpp"
#include "support/test_util.hpp"

namespace fs = std::filesystem;

namespace {

using crest::test::CliRun;
using crest::test::run_crest;
using crest::test::TempDir;

const std::string kGraphDemo = crest::test::source_path("configs/cosmoflow-graph-demo.yaml");

// A small 16^3 network: conv -> relu -> 4x max pool -> flatten -> dense -> tanh -> mse.
const char* kTinyGraph = R"(
data: {name: dummy, n_train: 8, n_valid: 4, sample_shape: [16, 16, 16, 4], batch_size: 4,
       n_epochs: 1, seed: 1}
model:
  name: graph
  inputs:
    - {name: x, shape: [4, 16, 16, 16], layout: channels_last}
    - {name: y, shape: [4]}
  layers:
    - {name: conv, kind: conv, out_channels: 4, kernel: [3, 3, 3], same: true}
    - {name: act, kind: relu}
    - {name: pool, kind: max_pool, kernel: [4, 4, 4]}
    - {name: flatten, kind: flatten}
    - {name: fc, kind: dense, out_features: 4}
    - {name: out, kind: tanh}
    - {name: loss, kind: mse_loss, inputs: [out, y]}
  outputs: [out]
  loss: loss
optimizer: {name: SGD, momentum: 0.9}
crest: {threads: 2}
)";

std::string tiny_config(const TempDir& d) {
  std::ofstream(d.file("tiny.yaml")) << kTinyGraph;
  return d.file("tiny.yaml");
}

std::string total_parameters(const std::string& out) {
  std::smatch m;
  return std::regex_search(out, m, std::regex("total parameters: ([0-9,]+)")) ? m[1].str() : "";
}

TEST(GraphModelCli, TrainsAndResumesFromTheRunDirectory) {
  TempDir d;
  const std::string run = d.file("run");
  CliRun r = run_crest("train --config " + tiny_config(d) + " output_dir=" + run);
  ASSERT_EQ(r.code, 0) << r.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex("epoch 1/1 +loss ([0-9.]+)"))) << r.out;
  EXPECT_TRUE(std::isfinite(std::stod(m[1])));
  const std::string text = crest::test::slurp(run + "/config.yaml");
  EXPECT_NE(text.find("name: graph"), std::string::npos) << text;
  EXPECT_NE(text.find("{name: conv, kind: conv, inputs: [x]"), std::string::npos) << text;
  // The resume reads the graph back from config.yaml: the same model, so it is accepted.
  CliRun resumed = run_crest("train --resume " + run + " data.n_epochs=2");
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  EXPECT_NE(resumed.out.find("epoch 2/2"), std::string::npos) << resumed.out;
}

// The trainer knows no input names: a graph's first input takes the samples and its second the
// targets, whatever they are called, and the task's metrics come from train.metrics.
TEST(GraphModelCli, AnyInputNamesAndMetricsTrain) {
  TempDir d;
  std::string renamed = kTinyGraph;
  renamed.replace(renamed.find("{name: x,"), 9, "{name: volume,");
  renamed.replace(renamed.find("{name: y,"), 9, "{name: truth,");
  renamed.replace(renamed.find("[out, y]"), 8, "[out, truth]");
  std::ofstream(d.file("renamed.yaml")) << renamed;
  const CliRun r = run_crest("train --config " + d.file("renamed.yaml") +
                             " train.metrics=[mean_squared_error,mae] output_dir=" + d.file("run"));
  ASSERT_EQ(r.code, 0) << r.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      r.out, m,
      std::regex("epoch 1/1 +loss [0-9.]+ +val_loss ([0-9.]+) +val_mse ([0-9.]+) +"
                 "val_mae ([0-9.]+)")))
      << r.out;
  // Validation MSE is the validation loss (the graph's loss is an MSE), up to rounding.
  EXPECT_NEAR(std::stod(m[1]), std::stod(m[2]), 1e-4) << r.out;
  EXPECT_GT(std::stod(m[3]), 0) << r.out;
}

TEST(GraphModelCli, TheDemoAsAGraphIsTheDemosNetwork) {
  CliRun g = run_crest("train --config " + kGraphDemo + " --dry-run");
  CliRun c = run_crest("train --config " + crest::test::source_path("configs/cosmoflow-demo.yaml") +
                       " --dry-run");
  ASSERT_EQ(g.code, 0) << g.out;
  ASSERT_EQ(c.code, 0) << c.out;
  EXPECT_EQ(total_parameters(g.out), "4,778,788") << g.out;
  EXPECT_EQ(total_parameters(g.out), total_parameters(c.out));
}

TEST(GraphModelCli, BadModelSectionsExit2NamingTheKey) {
  TempDir d;
  const std::string cfg = tiny_config(d);
  const std::string out = " output_dir=" + d.file("out");
  CliRun r = run_crest("train --config " + cfg + out + " model.conv_size=8");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("model.conv_size"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("built-in cosmoflow model"), std::string::npos) << r.out;

  std::string bad = kTinyGraph;
  bad.replace(bad.find("kind: relu"), 10, "kind: rleu");
  std::ofstream(d.file("bad.yaml")) << bad;
  r = run_crest("train --config " + d.file("bad.yaml") + out);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("bad.yaml:11: model.layers[1] (act).kind: unknown layer kind 'rleu'"),
            std::string::npos)
      << r.out;

  r = run_crest("train --config " + cfg + out + " data.sample_shape=[32,32,32,4]");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("does not match the model's input x"), std::string::npos) << r.out;

  // The data feeds two inputs, samples then targets: a third has nothing to feed it.
  std::string three = kTinyGraph;
  three.insert(three.find("  layers:"), "    - {name: extra, shape: [2]}\n");
  std::ofstream(d.file("three.yaml")) << three;
  r = run_crest("train --config " + d.file("three.yaml") + out);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("model.inputs: a graph model takes two inputs"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(d.file("out"))) << "a refused config must write nothing";
}

}  // namespace
