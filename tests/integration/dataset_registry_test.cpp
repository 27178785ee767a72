// A dataset added the way docs/extending.md describes — one entry and one registration line, here
// in the test binary — is read and checked by the config loader, sets its defaults, and feeds
// crest train, with no other file naming it.
#include "crest/train/dataset_registry.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>

#include "crest/core/error.hpp"
#include "crest/data/dummy_dataset.hpp"
#include "crest/dist/communicator.hpp"
#include "crest/train/trainer.hpp"
#include "crest/train/training_data.hpp"
#include "support/cli_util.hpp"
#include "support/config_error.hpp"

namespace crest {
namespace {

int splits_opened = 0;

// Synthetic samples like dummy's, from a seed of its own; validation reads every sample.
DatasetType twin_dataset() {
  DatasetType t;
  t.name = "TwinDummy";
  t.sample_dims = "[D, H, W, C]";
  t.validates_every_sample = true;
  t.default_metrics = {"mean_squared_error"};
  t.check = [](const DataSection& r, DataConfig& d) {
    if (d.sample_shape.rank() != 4) r.fail("sample_shape", "expected [D, H, W, C]");
    if (d.apply_log) r.fail("apply_log", "TwinDummy's samples have no counts to take the log of");
  };
  t.open_splits = [](const DataConfig& dc, const std::string& /*root*/) {
    ++splits_opened;
    SplitSources s;
    s.train = make_dummy_source(dc.sample_shape, dc.target_shape[0], dc.n_train, dc.seed + 7);
    s.valid = make_dummy_source(dc.sample_shape, dc.target_shape[0], dc.n_valid, dc.seed + 8);
    return s;
  };
  return t;
}

CREST_REGISTER_DATASET(twin, twin_dataset());

// n_valid 1 < batch_size 2: refused for cosmo, which validates full batches only.
const char* kTiny = R"(
data: {name: twin_dummy, n_train: 4, n_valid: 1, sample_shape: [16, 16, 16, 4], batch_size: 2,
       n_epochs: 1, seed: 3}
model: {name: cosmoflow, conv_size: 2, n_conv_layers: 2, fc1_size: 8, fc2_size: 8, dropout: 0}
optimizer: {name: SGD, momentum: 0.9}
train: {checkpoint_every: 0}
crest: {backend: reference, threads: 1}
)";

std::string load_error(const std::vector<std::string>& overrides) {
  return test::config_load_error(kTiny, overrides);
}

TEST(DatasetRegistry, ARegisteredDatasetIsReadAndChecked) {
  const Config c = load_config_text(kTiny, "tiny.yaml");
  EXPECT_EQ(c.data.name, "TwinDummy") << "the registered spelling, matched ignoring case and '_'";
  EXPECT_EQ(c.train.metrics, std::vector<std::string>{"mean_squared_error"}) << "its default";
  EXPECT_EQ(c.data.target_shape, Shape{4}) << "float targets: model.target_size";
  EXPECT_NE(to_yaml(c).find("name: TwinDummy"), std::string::npos);

  std::string m = load_error({"data.apply_log=true"});
  EXPECT_NE(m.find("data.apply_log"), std::string::npos) << m;
  EXPECT_NE(m.find("no counts"), std::string::npos) << "its own check ran: " << m;
  m = load_error({"data.channels=[0]"});
  EXPECT_NE(m.find("data.channels"), std::string::npos) << m;
  EXPECT_NE(m.find("applies to data.name: deepcam, not TwinDummy"), std::string::npos) << m;
  m = load_error({"data.name=twins"});
  EXPECT_NE(m.find("TwinDummy"), std::string::npos) << "the unknown-name error lists it: " << m;
  m = load_error({"data.name=dummy"});
  EXPECT_NE(m.find("data.n_valid"), std::string::npos) << "dummy validates full batches: " << m;
}

TEST(DatasetRegistry, TrainingReadsIt) {
  test::TempDir d;
  const Config c = load_config_text(kTiny, "tiny.yaml", {"output_dir=" + d.file("run")});
  splits_opened = 0;
  std::ostringstream log;
  const TrainSummary s = run_training(c, TrainOptions{}, log);
  EXPECT_GE(splits_opened, 1) << "the trainer opened its splits";
  EXPECT_EQ(s.steps, 2) << log.str();
  ASSERT_TRUE(s.epochs.at(0).validated) << "one sample validated: every sample, in a short batch";
  EXPECT_TRUE(std::isfinite(s.epochs.at(0).val_loss));
}

TEST(DatasetRegistry, ADatasetWithoutFilesRefusesADirectory) {
  const Config c = load_config_text(kTiny, "tiny.yaml");
  auto comm = make_single_process_communicator();
  std::ostringstream log;
  try {
    open_split(c, *comm, log, "/some/dir");
    FAIL() << "a directory was opened for a dataset without files";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("TwinDummy dataset has no files"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace crest
