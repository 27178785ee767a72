// Config sections are tables (src/train/config/): every key has a default and a printer, so a
// config with every key changed from its default prints a resolved YAML that loads back to the
// same configuration, and a config with only the required keys prints every section in full.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <string>

#include "crest/backends/kernels.hpp"
#include "crest/core/error.hpp"
#include "crest/models/cosmoflow.hpp"
#include "crest/train/config.hpp"
#include "support/host_backends.hpp"

namespace crest {
namespace {

// Every key of every section away from its default (crest.precision aside: float64 needs the
// reference backend, which every build has).
const char* kEveryKey = R"(output_dir: runs/every
mlperf: {org: ORG, division: open, status: cloud, platform: PLATFORM, stdout: true}
data:
  name: cosmo
  data_dir: /data/x
  compression: GZIP
  n_train: 64
  n_valid: 16
  sample_shape: [16, 16, 16, 3]
  target_shape: [2]
  batch_size: 8
  n_epochs: 7
  shard: false
  apply_log: true
  prefetch: 2
  n_parallel_reads: 3
  samples_per_file: 1
  shuffle_valid: true
  shuffle: false
  seed: 11
  cache_bytes: 1GiB
  stage_dir: /tmp/stage
  on_error: skip
  format: npy
model:
  name: cosmoflow
  input_shape: [16, 16, 16, 3]
  kernel_size: 5
  target_size: 2
  conv_size: 3
  n_conv_layers: 2
  fc1_size: 12
  fc2_size: 6
  hidden_activation: Tanh
  pooling_type: AvgPool3D
  dropout: 0.25
  l2: 0.001
optimizer: {name: AdamW, betas: [0.8, 0.95], eps: 1.0e-6, weight_decay: 0.02}
lr_schedule:
  base_lr: 0.002
  scaling: sqrt
  base_batch_size: 32
  n_warmup_epochs: 2
  decay_schedule: {3: 0.5, 5: 0.25}
train:
  loss: mse
  metrics: [mean_squared_error, mean_absolute_error]
  early_stopping_patience: 4
  target_mae: 0.2
  checkpoint_every: 100 steps
  checkpoint_keep: 2
  log_every_s: 5.0
  report: true
crest: {backend: reference, threads: 2, precision: float64}
dist: {backend: mpi, bucket_mb: 8.0, first_bucket_mb: 0.5, timeout_s: 60.0, timeline: t.json,
       compress: bf16}
)";

std::string body(const std::string& y) { return y.substr(y.find("\noutput_dir:")); }

TEST(ConfigTables, EveryKeyRoundTripsThroughResolvedYaml) {
  const Config a = load_config_text(kEveryKey, "every.yaml");
  const Config b = load_config_text(a.resolved_yaml, "resolved.yaml");
  EXPECT_EQ(body(a.resolved_yaml), body(b.resolved_yaml));
  // Spot checks that each section kept its non-default values.
  EXPECT_EQ(b.mlperf.division, "open");
  EXPECT_TRUE(b.mlperf.echo_stdout);
  EXPECT_EQ(b.data.format, SampleFileFormat::npy);
  EXPECT_EQ(b.data.cache_bytes, int64_t{1} << 30);
  EXPECT_FALSE(b.data.shuffle);
  EXPECT_EQ(b.data.target_shape, Shape{2});
  EXPECT_EQ(cosmoflow_options(b.model.attrs).pooling_type, Pooling::avg);
  EXPECT_EQ(cosmoflow_options(b.model.attrs).kernel_size, 5);
  EXPECT_DOUBLE_EQ(b.optimizer.beta2, 0.95);
  EXPECT_DOUBLE_EQ(b.optimizer.weight_decay, 0.02);
  EXPECT_EQ(b.lr_schedule.scaling, LrScaling::sqrt);
  EXPECT_EQ(b.lr_schedule.decay_schedule.size(), 2u);
  EXPECT_TRUE(b.train.checkpoint_every_steps);
  EXPECT_EQ(b.train.metrics.size(), 2u);
  EXPECT_EQ(b.crest.precision, Precision::float64);
  EXPECT_EQ(b.dist.compress, "bf16");
  EXPECT_EQ(b.dist.timeline, "t.json");
}

// Only the required keys: every section is printed in full from the defaults.
TEST(ConfigTables, DefaultsArePrintedForEverySection) {
  const Config c = load_config_text(R"(
data: {name: dummy, n_train: 8, sample_shape: [32, 32, 32, 4], batch_size: 4, n_epochs: 1}
model: {name: cosmoflow}
optimizer: {name: SGD}
)",
                                    "minimal.yaml");
  const YAML::Node y = YAML::Load(c.resolved_yaml);
  const std::pair<const char*, std::vector<const char*>> expected[] = {
      {"data",
       {"name", "n_train", "n_valid", "sample_shape", "target_shape", "batch_size", "n_epochs",
        "shard", "apply_log", "prefetch", "n_parallel_reads", "samples_per_file", "shuffle_valid",
        "shuffle", "seed", "cache_bytes", "on_error", "format"}},
      {"model",
       {"name", "input_shape", "kernel_size", "target_size", "conv_size", "n_conv_layers",
        "fc1_size", "fc2_size", "hidden_activation", "pooling_type", "dropout", "l2"}},
      {"optimizer", {"name", "momentum", "nesterov", "weight_decay"}},
      {"lr_schedule", {"base_lr", "scaling", "n_warmup_epochs", "decay_schedule"}},
      {"train",
       {"loss", "metrics", "checkpoint_every", "checkpoint_keep", "log_every_s", "report"}},
      {"crest", {"backend", "threads", "precision"}},
      {"dist", {"backend", "bucket_mb", "first_bucket_mb", "timeout_s", "compress"}}};
  for (const auto& [section, keys] : expected)
    for (const char* key : keys)
      EXPECT_TRUE(y[section][key].IsDefined()) << section << "." << key << "\n" << c.resolved_yaml;
  EXPECT_EQ(y["crest"]["precision"].as<std::string>(), "float32");
  EXPECT_EQ(y["model"]["input_shape"].as<std::vector<int64_t>>(),
            (std::vector<int64_t>{32, 32, 32, 4}));
  EXPECT_EQ(y["data"]["target_shape"].as<std::vector<int64_t>>(), std::vector<int64_t>{4});
}

std::string error_of(const std::string& text, const std::vector<std::string>& overrides = {}) {
  try {
    load_config_text(text, "p.yaml", overrides);
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2) << e.what();
    return e.what();
  }
  return "";
}

const char* kSmall =
    R"(data: {name: dummy, n_train: 8, sample_shape: [32, 32, 32, 4], batch_size: 4,
       n_epochs: 1}
model: {name: cosmoflow}
optimizer: {name: SGD}
)";

TEST(ConfigPrecision, Float64NeedsABackendThatComputesInDouble) {
  const auto names = crest::test::host_backend_names();
  if (std::find(names.begin(), names.end(), "onednn") == names.end())
    GTEST_SKIP() << "built without oneDNN";
  const std::string e = error_of(kSmall, {"crest.backend=onednn", "crest.precision=float64"});
  EXPECT_NE(e.find("crest.precision"), std::string::npos) << e;
  EXPECT_NE(e.find("crest.backend onednn"), std::string::npos) << e;
  EXPECT_NE(e.find("reference"), std::string::npos) << e;
}

TEST(ConfigPrecision, ParsedThroughItsEnumTable) {
  const Config c =
      load_config_text(kSmall, "p.yaml", {"crest.backend=reference", "crest.precision=float64"});
  EXPECT_EQ(c.crest.precision, Precision::float64);
  EXPECT_EQ(precision_dtype(c.crest.precision), DType::f64);
  EXPECT_NE(c.resolved_yaml.find("precision: float64"), std::string::npos) << c.resolved_yaml;
  EXPECT_EQ(load_config_text(kSmall, "p.yaml").crest.precision, Precision::float32);
  const std::string e = error_of(kSmall, {"crest.precision=float16"});
  EXPECT_NE(e.find("crest.precision"), std::string::npos) << e;
  EXPECT_NE(e.find("float32, float64"), std::string::npos) << e;
}

}  // namespace
}  // namespace crest
