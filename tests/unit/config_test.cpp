// Config loading: the reference CosmoFlow files load unchanged, overrides work, and every kind of
// mistake is an input error (exit code 2) that names the file and the key path.
#include "crest/train/config.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "crest/core/error.hpp"
#include "crest/models/cosmoflow.hpp"

namespace crest {
namespace {

namespace fs = std::filesystem;

// The cosmoflow section of a loaded config, typed.
CosmoFlowOptions cf(const Config& c) { return cosmoflow_options(c.model.attrs); }

// mlcommons/hpc cosmoflow/configs/cosmo.yaml, verbatim (also /work/shared/reference/cosmo.yaml).
const char* kReferenceCosmo = R"(output_dir: results/cosmo-002

mlperf:
    org: LBNL
    division: closed
    status: onprem
    platform: SUBMISSION_PLATFORM_PLACEHOLDER

data:
    name: cosmo
    data_dir: /global/cscratch1/sd/sfarrell/cosmoflow-benchmark/data/cosmoUniverse_2019_05_4parE_tf_v2
    compression: GZIP
    n_train: 524288
    n_valid: 65536
    sample_shape: [128, 128, 128, 4]
    batch_size: 4
    n_epochs: 128
    shard: True
    apply_log: True
    prefetch: 4

model:
    name: cosmoflow
    input_shape: [128, 128, 128, 4]
    kernel_size: 3
    target_size: 4
    conv_size: 32
    fc1_size: 128
    fc2_size: 64
    hidden_activation: LeakyReLU
    pooling_type: MaxPool3D
    dropout: 0.5

optimizer:
    name: SGD
    momentum: 0.9

lr_schedule:
    # Standard linear LR scaling configuration
    base_lr: 0.001
    scaling: linear
    base_batch_size: 64
    n_warmup_epochs: 4

    # Learning rate decay epochs and decay factors
    decay_schedule:
        32: 0.25
        64: 0.125

train:
    loss: mse
    metrics: ['mean_absolute_error']
    #early_stopping_patience: 8

    # Uncomment to stop at target quality
    #target_mae: 0.124
)";

// mlcommons/hpc cosmoflow/configs/cosmo_dummy.yaml, verbatim.
const char* kReferenceDummy = R"(output_dir: results/cosmo-dummy-000

data:
    name: dummy
    n_train: 256
    n_valid: 256
    sample_shape: [128, 128, 128, 4]
    target_shape: [4]
    batch_size: 4
    n_epochs: 4
    shard: True

model:
    name: cosmoflow
    input_shape: [128, 128, 128, 4]
    target_size: 4
    conv_size: 32
    fc1_size: 128
    fc2_size: 64
    hidden_activation: LeakyReLU
    pooling_type: MaxPool3D
    dropout: 0.5

optimizer:
    name: SGD
    momentum: 0.9

lr_schedule:
    # Standard linear LR scaling configuration, tested up to batch size 1024
    base_lr: 0.001
    scaling: linear
    base_batch_size: 64

    # Alternate sqrt LR scaling which has worked well for batch size 512-1024.
    #base_lr: 0.0025
    #scaling: sqrt
    #base_batch_size: 32

    n_warmup_epochs: 4

    # You may want to adjust these decay epochs depending on your batch size.
    # E.g. if training batch size 64 you may want to decay at 16 and 32 epochs.
    decay_schedule:
        32: 0.25
        64: 0.125

train:
    loss: mse
    metrics: ['mean_absolute_error']
    early_stopping_patience: 8
)";

// A small valid config; error tests change one thing in it.
const char* kSmall = R"(output_dir: runs/small
data:
    name: dummy
    n_train: 16
    n_valid: 8
    sample_shape: [32, 32, 32, 4]
    batch_size: 4
    n_epochs: 2
model:
    name: cosmoflow
    dropout: 0.5
optimizer:
    name: SGD
    momentum: 0.9
lr_schedule:
    base_lr: 0.001
    scaling: linear
    base_batch_size: 64
    n_warmup_epochs: 1
    decay_schedule:
        1: 0.5
)";

class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "crest-config-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }

  // `fn` must throw crest::Error with exit code 2 and a message containing every needle.
  static void expect_error(const std::function<void()>& fn,
                           std::initializer_list<std::string> needles) {
    try {
      fn();
      ADD_FAILURE() << "no error; expected one mentioning '" << *needles.begin() << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), 2) << e.what();
      for (const auto& n : needles)
        EXPECT_NE(std::string(e.what()).find(n), std::string::npos)
            << "message: " << e.what() << "\nmissing: " << n;
    }
  }
  // Loading kSmall with `from` replaced by `to` must fail naming the file, `key` and `needle`.
  void expect_file_error(const std::string& from, const std::string& to, const std::string& key,
                         const std::string& needle) {
    std::string text = kSmall;
    const auto pos = text.find(from);
    ASSERT_NE(pos, std::string::npos) << from;
    text.replace(pos, from.size(), to);
    const std::string path = write("bad.yaml", text);
    SCOPED_TRACE(key + " / " + needle);
    expect_error([&] { load_config(path); }, {path, key, needle});
  }
  // Loading kSmall with `override` must fail naming the file, `key` and `needle`.
  void expect_override_error(const std::string& override, const std::string& key,
                             const std::string& needle) {
    const std::string path = write("small.yaml", kSmall);
    SCOPED_TRACE(override);
    expect_error([&] { load_config(path, {override}); }, {path, key, needle});
  }

  fs::path dir_;
};

TEST_F(ConfigTest, LoadsReferenceCosmoYamlUnchanged) {
  const std::string path = write("cosmo.yaml", kReferenceCosmo);
  const Config c = load_config(path);
  EXPECT_EQ(c.source, path);
  EXPECT_EQ(c.output_dir, "results/cosmo-002");
  EXPECT_TRUE(c.mlperf.present);
  EXPECT_EQ(c.mlperf.org, "LBNL");
  EXPECT_EQ(c.mlperf.division, "closed");
  EXPECT_EQ(c.mlperf.status, "onprem");
  EXPECT_EQ(c.mlperf.platform, "SUBMISSION_PLATFORM_PLACEHOLDER");

  EXPECT_EQ(c.data.name, "cosmo");
  EXPECT_EQ(c.data.data_dir,
            "/global/cscratch1/sd/sfarrell/cosmoflow-benchmark/data/"
            "cosmoUniverse_2019_05_4parE_tf_v2");
  EXPECT_EQ(c.data.compression, Compression::gzip);
  EXPECT_EQ(c.data.n_train, 524288);
  EXPECT_EQ(c.data.n_valid, 65536);
  EXPECT_EQ(c.data.sample_shape, (Shape{128, 128, 128, 4}));
  EXPECT_EQ(c.data.target_shape, (Shape{4}));
  EXPECT_EQ(c.data.batch_size, 4);
  EXPECT_EQ(c.data.n_epochs, 128);
  EXPECT_TRUE(c.data.shard);
  EXPECT_TRUE(c.data.apply_log);
  EXPECT_EQ(c.data.prefetch, 4);
  EXPECT_TRUE(c.data.shuffle);
  EXPECT_FALSE(c.data.shuffle_valid);
  EXPECT_EQ(c.data.seed, 0u);
  EXPECT_EQ(c.data.cache_bytes, 0);
  EXPECT_TRUE(c.data.stage_dir.empty());
  EXPECT_EQ(c.data.on_error, OnSampleError::fail);

  EXPECT_EQ(c.model.name, "cosmoflow");
  EXPECT_EQ(cf(c).input_shape, (std::vector<int64_t>{128, 128, 128, 4}));
  EXPECT_EQ(cf(c).kernel_size, 3);
  EXPECT_EQ(cf(c).target_size, 4);
  EXPECT_EQ(cf(c).conv_size, 32);
  EXPECT_EQ(cf(c).n_conv_layers, 5);
  EXPECT_EQ(cf(c).fc1_size, 128);
  EXPECT_EQ(cf(c).fc2_size, 64);
  EXPECT_EQ(cf(c).hidden_activation, Activation::leaky_relu);
  EXPECT_EQ(cf(c).pooling_type, Pooling::max);
  EXPECT_DOUBLE_EQ(cf(c).dropout, 0.5);
  EXPECT_DOUBLE_EQ(cf(c).l2, 0.0);

  EXPECT_EQ(c.optimizer.name, "SGD");
  EXPECT_DOUBLE_EQ(c.optimizer.momentum, 0.9);
  EXPECT_FALSE(c.optimizer.nesterov);
  EXPECT_DOUBLE_EQ(c.optimizer.weight_decay, 0.0);

  EXPECT_DOUBLE_EQ(c.lr_schedule.base_lr, 0.001);
  EXPECT_EQ(c.lr_schedule.scaling, LrScaling::linear);
  EXPECT_EQ(c.lr_schedule.base_batch_size, 64);
  EXPECT_EQ(c.lr_schedule.n_warmup_epochs, 4);
  EXPECT_EQ(c.lr_schedule.decay_schedule, (std::map<int, double>{{32, 0.25}, {64, 0.125}}));

  EXPECT_EQ(c.train.loss, "mse");
  EXPECT_EQ(c.train.metrics, std::vector<std::string>{"mean_absolute_error"});
  EXPECT_FALSE(c.train.early_stopping_patience.has_value());
  EXPECT_FALSE(c.train.target_mae.has_value());

  EXPECT_EQ(c.crest.backend, default_backend_name());  // onednn where it is built
  EXPECT_EQ(c.crest.threads, 0);
  EXPECT_NE(c.resolved_yaml.find("decay_schedule:\n    32: 0.25\n    64: 0.125\n"),
            std::string::npos)
      << c.resolved_yaml;
}

TEST_F(ConfigTest, LoadsReferenceDummyYamlUnchanged) {
  const std::string path = write("cosmo_dummy.yaml", kReferenceDummy);
  const Config c = load_config(path);
  EXPECT_EQ(c.output_dir, "results/cosmo-dummy-000");
  EXPECT_FALSE(c.mlperf.present);
  EXPECT_EQ(c.data.name, "dummy");
  EXPECT_TRUE(c.data.data_dir.empty());  // the dummy set needs none
  EXPECT_EQ(c.data.compression, Compression::none);
  EXPECT_EQ(c.data.n_train, 256);
  EXPECT_EQ(c.data.n_valid, 256);
  EXPECT_EQ(c.data.target_shape, (Shape{4}));
  EXPECT_EQ(c.data.n_epochs, 4);
  EXPECT_FALSE(c.data.apply_log);   // the reference default
  EXPECT_EQ(cf(c).kernel_size, 3);  // not in the file: the reference default
  EXPECT_EQ(cf(c).input_shape, (std::vector<int64_t>{128, 128, 128, 4}));
  ASSERT_TRUE(c.train.early_stopping_patience.has_value());
  EXPECT_EQ(*c.train.early_stopping_patience, 8);
  EXPECT_EQ(c.lr_schedule.scaling, LrScaling::linear);
}

TEST_F(ConfigTest, SharedReferenceFilesLoadWhenPresent) {
  // The copies the project keeps beside SPEC.md; skipped where that folder is absent.
  for (const char* name : {"cosmo.yaml", "cosmo_dummy.yaml"}) {
    const std::string path = std::string(CREST_SOURCE_DIR) + "/../shared/reference/" + name;
    if (!fs::exists(path)) GTEST_SKIP() << path << " not present";
    EXPECT_NO_THROW(load_config(path)) << path;
  }
}

TEST_F(ConfigTest, RepositoryConfigsLoad) {
  const std::string root = CREST_SOURCE_DIR;
  const Config full = load_config(root + "/configs/cosmoflow.yaml");
  EXPECT_EQ(full.data.name, "cosmo");
  EXPECT_EQ(full.data.sample_shape, (Shape{128, 128, 128, 4}));
  EXPECT_EQ(full.data.n_train, 524288);
  EXPECT_EQ(full.lr_schedule.base_batch_size, 64);

  const Config demo = load_config(root + "/configs/cosmoflow-demo.yaml");
  EXPECT_EQ(demo.output_dir, "runs/cosmoflow-demo");
  EXPECT_EQ(demo.data.name, "dummy");
  EXPECT_EQ(demo.data.sample_shape, (Shape{32, 32, 32, 4}));
  EXPECT_EQ(demo.data.batch_size, 4);
  EXPECT_EQ(demo.data.n_epochs, 3);
  EXPECT_LE(demo.data.n_train, 128);
  EXPECT_DOUBLE_EQ(cf(demo).dropout, 0.5);
}

TEST_F(ConfigTest, ResolvedYamlLoadsToTheSameConfig) {
  auto body = [](const std::string& y) { return y.substr(y.find("\noutput_dir:")); };
  for (const char* text : {kReferenceCosmo, kReferenceDummy, kSmall}) {
    const Config a =
        load_config(write("a.yaml", text), {"optimizer.name=adamw", "optimizer.momentum=null"});
    const Config b = load_config(write("b.yaml", a.resolved_yaml));
    EXPECT_EQ(body(a.resolved_yaml), body(b.resolved_yaml));
  }
  const Config a =
      load_config(write("a.yaml", kSmall), {"data.cache_bytes=1.5GiB", "train.target_mae=0.124",
                                            "data.stage_dir=/tmp/x y", "model.l2=1e-5"});
  const Config b = load_config(write("b.yaml", a.resolved_yaml));
  EXPECT_EQ(body(a.resolved_yaml), body(b.resolved_yaml));
  EXPECT_EQ(b.data.cache_bytes, int64_t{3} << 29);
  EXPECT_EQ(b.data.stage_dir, "/tmp/x y");
  EXPECT_DOUBLE_EQ(*b.train.target_mae, 0.124);
  EXPECT_DOUBLE_EQ(cf(b).l2, 1e-5);
  // Floats are written so YAML 1.1 readers (PyYAML) see floats too.
  EXPECT_NE(a.resolved_yaml.find("l2: 1.0e-05"), std::string::npos) << a.resolved_yaml;
}

TEST_F(ConfigTest, OverridesScalarsListsAndNestedKeys) {
  const std::string path = write("cosmo.yaml", kReferenceCosmo);
  const Config c =
      load_config(path, {"data.batch_size=2", "data.sample_shape=[32,32,32,4]", "output_dir=runs/x",
                         "model.dropout=0", "lr_schedule.decay_schedule.16=0.5", "crest.threads=3",
                         "crest.backend=reference", "data.compression=null", "data.name=dummy"});
  EXPECT_EQ(c.data.batch_size, 2);
  EXPECT_EQ(c.data.sample_shape, (Shape{32, 32, 32, 4}));
  // input_shape restates sample_shape in the reference schema and follows its override.
  EXPECT_EQ(cf(c).input_shape, (std::vector<int64_t>{32, 32, 32, 4}));
  EXPECT_EQ(c.output_dir, "runs/x");
  EXPECT_DOUBLE_EQ(cf(c).dropout, 0.0);
  EXPECT_EQ(c.lr_schedule.decay_schedule,
            (std::map<int, double>{{16, 0.5}, {32, 0.25}, {64, 0.125}}));
  EXPECT_EQ(c.crest.threads, 3);
  EXPECT_EQ(c.crest.backend, "reference");
  EXPECT_EQ(c.data.compression, Compression::none);
  EXPECT_EQ(c.data.name, "dummy");
  EXPECT_EQ(c.overrides.size(), 9u);
  EXPECT_NE(c.resolved_yaml.find("batch_size: 2\n"), std::string::npos);
  EXPECT_NE(c.resolved_yaml.find("data.batch_size=2"), std::string::npos);  // in the header
  EXPECT_NE(c.resolved_yaml.find("sample_shape: [32, 32, 32, 4]"), std::string::npos);
}

TEST_F(ConfigTest, OverridesReplaceSectionsAndRestoreDefaults) {
  const std::string path = write("small.yaml", kSmall);
  // The last override of a key wins; null restores the default.
  Config c = load_config(path, {"data.batch_size=8", "data.batch_size=2", "model.dropout=null"});
  EXPECT_EQ(c.data.batch_size, 2);
  EXPECT_DOUBLE_EQ(cf(c).dropout, 0.5);

  // Switching optimizer means unsetting what only SGD takes.
  c = load_config(
      path, {"optimizer.name=adam", "optimizer.momentum=null", "optimizer.betas=[0.8, 0.99]"});
  EXPECT_EQ(c.optimizer.name, "Adam");
  EXPECT_DOUBLE_EQ(c.optimizer.beta1, 0.8);
  EXPECT_DOUBLE_EQ(c.optimizer.beta2, 0.99);

  // A whole section as a YAML flow mapping; without lr_schedule, optimizer.lr is the rate.
  c = load_config(path, {"optimizer={name: AdamW, lr: 0.002}", "lr_schedule=null"});
  EXPECT_EQ(c.optimizer.name, "AdamW");
  EXPECT_DOUBLE_EQ(c.optimizer.weight_decay, 0.01);
  EXPECT_DOUBLE_EQ(c.lr_schedule.base_lr, 0.002);
  EXPECT_EQ(c.lr_schedule.scaling, LrScaling::none);
  EXPECT_TRUE(c.lr_schedule.decay_schedule.empty());

  // Keys the file lacks are created, sections included.
  c = load_config(path, {"mlperf.org=TEST", "data.on_error=skip", "data.seed=42"});
  EXPECT_TRUE(c.mlperf.present);
  EXPECT_EQ(c.mlperf.org, "TEST");
  EXPECT_EQ(c.data.on_error, OnSampleError::skip);
  EXPECT_EQ(c.data.seed, 42u);
}

TEST_F(ConfigTest, AcceptsReferenceSpellings) {
  const std::string path = write("small.yaml", kSmall);
  const Config c =
      load_config(path, {"model.hidden_activation=relu", "model.pooling_type=AveragePooling3D",
                         "data.shuffle_train=false", "train.metrics=mae", "data.apply_log=yes"});
  EXPECT_EQ(cf(c).hidden_activation, Activation::relu);
  EXPECT_EQ(cf(c).pooling_type, Pooling::avg);
  EXPECT_FALSE(c.data.shuffle);
  EXPECT_EQ(c.train.metrics, std::vector<std::string>{"mean_absolute_error"});
  EXPECT_TRUE(c.data.apply_log);
  EXPECT_EQ(load_config(path, {"optimizer.name=sgd"}).optimizer.name, "SGD");
  EXPECT_EQ(cf(load_config(path, {"model.hidden_activation=Tanh"})).hidden_activation,
            Activation::tanh);
}

TEST_F(ConfigTest, DefaultOutputDirFollowsFileName) {
  std::string text = kSmall;
  text.erase(0, text.find('\n') + 1);  // drop output_dir
  const Config c = load_config(write("my-run.yaml", text));
  EXPECT_EQ(c.output_dir, "runs/my-run");
}

TEST_F(ConfigTest, UnknownKeysAreErrors) {
  expect_file_error("batch_size: 4", "batchsize: 4", "data.batchsize",
                    "did you mean data.batch_size?");
  expect_file_error("model:\n    name: cosmoflow", "model:\n    name: cosmoflow\n    n_epochs: 3",
                    "model.n_epochs", "data.n_epochs");
  expect_file_error("optimizer:", "optimiser:", "optimiser", "did you mean optimizer?");
  expect_file_error("n_valid: 8", "n_valid: 8\n    n_valid: 8", "data.n_valid", "duplicate key");
  // The line of the offending key is named (kSmall line 5 holds n_valid).
  expect_file_error("n_valid: 8", "n_valdi: 8", "data.n_valdi", "bad.yaml:5: data.n_valdi");
}

TEST_F(ConfigTest, WrongTypesAreErrors) {
  expect_file_error("batch_size: 4", "batch_size: abc", "data.batch_size",
                    "expected a positive integer, got \"abc\"");
  expect_file_error("batch_size: 4", "batch_size: '4'", "data.batch_size", "the string \"4\"");
  expect_file_error("batch_size: 4", "batch_size: 4.5", "data.batch_size", "positive integer");
  expect_file_error("sample_shape: [32, 32, 32, 4]", "sample_shape: 32", "data.sample_shape",
                    "expected a list");
  expect_file_error("sample_shape: [32, 32, 32, 4]", "sample_shape: [32, x, 32, 4]",
                    "data.sample_shape[1]", "got \"x\"");
  expect_file_error("dropout: 0.5", "dropout: half", "model.dropout", "expected a number");
  expect_file_error("n_epochs: 2", "n_epochs: 2\n    shard: maybe", "data.shard",
                    "expected true or false");
  expect_file_error("model:\n    name: cosmoflow\n    dropout: 0.5\n", "model: 5\n", "model",
                    "expected a section");
  expect_file_error("1: 0.5", "x: 0.5", "lr_schedule.decay_schedule.x", "integer");
}

TEST_F(ConfigTest, ImpossibleValuesAreErrors) {
  expect_override_error("data.batch_size=0", "data.batch_size", "expected a positive integer");
  expect_override_error("data.batch_size=abc", "data.batch_size",
                        "expected a positive integer, got \"abc\"");
  expect_override_error("data.n_epochs=0", "data.n_epochs", "positive");
  expect_override_error("data.n_train=2", "data.n_train", "no batch");
  expect_override_error("data.sample_shape=[32,32,32]", "data.sample_shape", "4 entries");
  expect_override_error("data.sample_shape=[32,32,32,0]", "data.sample_shape[3]", "positive");
  expect_override_error("model.dropout=1", "model.dropout", "[0, 1)");
  expect_override_error("model.dropout=-0.1", "model.dropout", "[0, 1)");
  expect_override_error("model.l2=-1", "model.l2", "negative");
  expect_override_error("model.kernel_size=2", "model.kernel_size", "odd");
  expect_override_error("model.hidden_activation=Swish", "model.hidden_activation",
                        "LeakyReLU, ReLU, Tanh");
  expect_override_error("model.pooling_type=MinPool3D", "model.pooling_type", "MaxPool3D");
  expect_override_error("model.input_shape=[64,64,64,4]", "model.input_shape",
                        "differs from data.sample_shape");
  expect_override_error("data.target_shape=[3]", "data.target_shape", "model.target_size");
  expect_override_error("lr_schedule.scaling=cubic", "lr_schedule.scaling", "linear");
  expect_override_error("lr_schedule.base_lr=0", "lr_schedule.base_lr", "positive");
  expect_override_error("lr_schedule.base_batch_size=null", "lr_schedule.base_batch_size",
                        "required with scaling: linear");
  expect_override_error("lr_schedule.decay_schedule.3=0", "lr_schedule.decay_schedule.3",
                        "positive");
  expect_override_error("optimizer.name=RMSprop", "optimizer.name",
                        "Adam, AdamW, LAMB, LARC, LARS, SGD");
  expect_override_error("optimizer.name=Adam", "optimizer.momentum", "not used by Adam");
  expect_override_error("optimizer.momentum=1.5", "optimizer.momentum", "[0, 1)");
  expect_override_error("optimizer.lr=0.1", "optimizer.lr", "lr_schedule.base_lr");
  expect_override_error("data.name=cosmo", "data.data_dir", "required for data.name: cosmo");
  expect_override_error("data.name=mnist", "data.name", "cosmo, deepcam, dummy, imagenet");
  expect_override_error("data.compression=ZLIB", "data.compression", "GZIP");
  expect_override_error("data.samples_per_file=4", "data.samples_per_file", "one sample");
  expect_override_error("data.cache_bytes=lots", "data.cache_bytes", "byte count");
  expect_override_error("data.on_error=ignore", "data.on_error", "fail, skip");
  expect_override_error("crest.backend=tpu", "crest.backend", "available");
  expect_override_error("crest.threads=-1", "crest.threads", "non-negative");
  expect_override_error("crest.cuda_graphs=true", "crest.cuda_graphs", "records no graphs");
  expect_override_error("train.loss=mae", "train.loss", "mse");
  expect_override_error("train.metrics=[accuracy]", "train.metrics[0]", "unknown metric");
  expect_override_error("mlperf.division=free", "mlperf.division", "closed or open");
}

TEST_F(ConfigTest, SpatialSizeMustDivideByPooling) {
  expect_file_error("sample_shape: [32, 32, 32, 4]", "sample_shape: [48, 32, 32, 4]",
                    "data.sample_shape", "48 in [48, 32, 32, 4] is not divisible by 32");
  // Fewer conv layers relax the constraint; more tighten it.
  const std::string path = write("small.yaml", kSmall);
  EXPECT_NO_THROW(load_config(path, {"data.sample_shape=[48,32,32,4]", "model.n_conv_layers=4"}));
  expect_override_error("model.n_conv_layers=6", "data.sample_shape", "not divisible by 64");
}

TEST_F(ConfigTest, MissingFileAndBadYamlAreErrors) {
  const std::string missing = (dir_ / "nope.yaml").string();
  expect_error([&] { load_config(missing); }, {missing, "cannot read"});
  expect_error([&] { load_config(dir_.string()); }, {dir_.string(), "directory"});

  const std::string bad = write("syntax.yaml", "data:\n  name: dummy\n  sample_shape: [32, 32\n");
  expect_error([&] { load_config(bad); }, {bad + ":", "YAML syntax error"});
  const std::string tabs = write("tabs.yaml", "data:\n\tname: dummy\n");
  expect_error([&] { load_config(tabs); }, {tabs, "YAML syntax error"});
  const std::string empty = write("empty.yaml", "");
  expect_error([&] { load_config(empty); }, {empty, "empty"});
  const std::string scalar = write("scalar.yaml", "just text\n");
  expect_error([&] { load_config(scalar); }, {scalar, "top level"});
  const std::string nodata = write("nodata.yaml", "model:\n  name: cosmoflow\n");
  expect_error([&] { load_config(nodata); }, {nodata, "data", "missing"});
}

TEST_F(ConfigTest, BadOverridesAreErrors) {
  const std::string path = write("small.yaml", kSmall);
  // Unknown keys are refused like unknown keys in the file.
  expect_error([&] { load_config(path, {"data.batchsize=2"}); },
               {path, "data.batchsize", "did you mean data.batch_size?"});
  expect_error([&] { load_config(path, {"dataa.batch_size=2"}); }, {path, "dataa"});
  expect_error([&] { load_config(path, {"output_dir.x=2"}); }, {path, "output_dir", "section"});
  expect_error([&] { load_config(path, {"lr_schedule.decay_schedule.3.x=1"}); },
               {path, "lr_schedule.decay_schedule.3", "not a section"});
  // Malformed: no '=', empty path segment, value that is not YAML.
  expect_error([&] { load_config(path, {"data.batch_size"}); },
               {"data.batch_size", "key.path=value"});
  expect_error([&] { load_config(path, {"data..batch_size=2"}); },
               {"data..batch_size", "malformed"});
  expect_error([&] { load_config(path, {"data.sample_shape=[1,2"}); },
               {"data.sample_shape", "not valid YAML"});
  // A bad value names the override it came from.
  expect_error([&] { load_config(path, {"data.batch_size=abc"}); },
               {path, "data.batch_size", "from override 'data.batch_size=abc'",
                "expected a positive integer, got \"abc\""});
  // A key inside something that is not a section in the file.
  const std::string odd = write("odd.yaml", std::string(kSmall) + "crest: 3\n");
  expect_error([&] { load_config(odd, {"crest.threads=2"}); }, {odd, "crest", "not a section"});
}

TEST_F(ConfigTest, LoadingWritesNothing) {
  const std::string path = write("cosmo.yaml", kReferenceCosmo);
  const auto before = std::distance(fs::directory_iterator(dir_), fs::directory_iterator());
  const Config c = load_config(path, {"output_dir=" + (dir_ / "out").string()});
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), before);
  EXPECT_FALSE(fs::exists(dir_ / "out"));
}

}  // namespace
}  // namespace crest

namespace crest {
namespace {

TEST_F(ConfigTest, DistSectionKeysAndErrors) {
  const Config c = load_config(write("d.yaml", kSmall),
                               {"dist.bucket_mb=4", "dist.first_bucket_mb=0.5", "dist.timeout_s=60",
                                "dist.backend=mpi", "dist.timeline=runs/t.json"});
  EXPECT_DOUBLE_EQ(c.dist.bucket_mb, 4);
  EXPECT_DOUBLE_EQ(c.dist.first_bucket_mb, 0.5);
  EXPECT_DOUBLE_EQ(c.dist.timeout_s, 60);
  EXPECT_EQ(c.dist.backend, "mpi");
  EXPECT_EQ(c.dist.timeline, "runs/t.json");
  const Config b = load_config(write("e.yaml", c.resolved_yaml));
  EXPECT_EQ(b.dist.timeline, "runs/t.json");
  EXPECT_DOUBLE_EQ(b.dist.bucket_mb, 4);
  const Config d = load_config(write("f.yaml", kSmall));
  EXPECT_EQ(d.dist.backend, "auto");
  EXPECT_DOUBLE_EQ(d.dist.bucket_mb, 25);
  EXPECT_DOUBLE_EQ(d.dist.timeout_s, 300);
  expect_override_error("dist.bucket_mb=0", "dist.bucket_mb", "must be in");
  expect_override_error("dist.timeout_s=-1", "dist.timeout_s", "must be in");
  expect_override_error("dist.backend=nccl", "dist.backend", "expected auto, mpi or single");
  expect_override_error("dist.buckets=3", "dist.buckets", "unknown key");
  expect_override_error("dist.compress=fp8", "dist.compress", "expected none, bf16 or fp16");
  EXPECT_EQ(load_config(write("h.yaml", kSmall), {"dist.compress=fp16"}).dist.compress, "fp16");
  EXPECT_EQ(load_config(write("g.yaml", kSmall), {"dist.compress=bf16"}).dist.compress, "bf16");
}

// train.loss_scaling (dynamic loss scaling): off by default, the scaler's settings with torch's
// defaults, printed into the resolved YAML, and every value outside its range refused naming the
// key.
TEST_F(ConfigTest, LossScalingKeysAndErrors) {
  const Config d = load_config(write("d.yaml", kSmall));
  EXPECT_EQ(d.train.loss_scaling, LossScaling::off);
  EXPECT_EQ(d.train.loss_scale_initial, 65536);
  EXPECT_EQ(d.train.loss_scale_growth_interval, 2000);
  EXPECT_EQ(d.train.loss_scale_growth_factor, 2);
  EXPECT_EQ(d.train.loss_scale_backoff_factor, 0.5);
  EXPECT_NE(d.resolved_yaml.find("  loss_scaling: off\n"), std::string::npos) << d.resolved_yaml;
  const Config c =
      load_config(write("c.yaml", kSmall),
                  {"train.loss_scaling=dynamic", "train.loss_scale_initial=1024",
                   "train.loss_scale_growth_interval=10", "train.loss_scale_growth_factor=4",
                   "train.loss_scale_backoff_factor=0.25"});
  EXPECT_EQ(c.train.loss_scaling, LossScaling::dynamic);
  EXPECT_EQ(c.train.loss_scale_initial, 1024);
  EXPECT_EQ(c.train.loss_scale_growth_interval, 10);
  EXPECT_EQ(c.train.loss_scale_growth_factor, 4);
  EXPECT_EQ(c.train.loss_scale_backoff_factor, 0.25);
  const Config b = load_config(write("b.yaml", c.resolved_yaml));
  EXPECT_EQ(b.train.loss_scaling, LossScaling::dynamic);
  EXPECT_EQ(b.train.loss_scale_initial, 1024);
  EXPECT_EQ(b.train.loss_scale_backoff_factor, 0.25);
  expect_override_error("train.loss_scaling=static", "train.loss_scaling", "off, dynamic");
  expect_override_error("train.loss_scale_initial=0", "train.loss_scale_initial",
                        "must be in [1, 16777216]");
  expect_override_error("train.loss_scale_initial=1e9", "train.loss_scale_initial", "2^24");
  expect_override_error("train.loss_scale_initial=big", "train.loss_scale_initial",
                        "expected a number");
  expect_override_error("train.loss_scale_growth_interval=0", "train.loss_scale_growth_interval",
                        "positive integer");
  expect_override_error("train.loss_scale_growth_factor=1", "train.loss_scale_growth_factor",
                        "must be above 1");
  expect_override_error("train.loss_scale_backoff_factor=1", "train.loss_scale_backoff_factor",
                        "(0, 1)");
  expect_override_error("train.loss_scale_backoff_factor=0", "train.loss_scale_backoff_factor",
                        "(0, 1)");
}

}  // namespace
}  // namespace crest
