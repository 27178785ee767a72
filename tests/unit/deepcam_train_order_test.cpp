// data.train_order: the key (DeepCAM's only, refused elsewhere and with shuffle off), what it
// makes of the loader options (the reference sampler's seed 0, validation in crest's order),
// the resume rule (a mid-epoch resume keeps the order), and end to end: the training loader over
// a small DeepCAM dataset hands each rank the files the reference's DataLoader hands it
// (tests/fixtures/deepcam_reference_order.txt, the 11-file 3-rank case).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "crest/core/error.hpp"
#include "crest/data/datagen.hpp"
#include "crest/data/loader.hpp"
#include "crest/train/checkpoint.hpp"
#include "crest/train/config.hpp"
#include "crest/train/run_directory.hpp"
#include "crest/train/training_data.hpp"
#include "support/fake_communicator.hpp"
#include "support/test_util.hpp"
#include "unit/data_formats_test_util.hpp"

namespace crest {
namespace {

std::string deepcam_config(const std::string& data_dir, const std::string& data_extra = "") {
  return "data:\n  name: deepcam\n  data_dir: " + data_dir +
         "\n  batch_size: 2\n  n_epochs: 3\n  sample_shape: [16, 16, 16]\n" + data_extra +
         "model:\n  name: deepcam\noptimizer: {name: Adam}\n";
}

const char* kDummyConfig =
    "data: {name: dummy, n_train: 8, n_valid: 0, sample_shape: [32, 32, 32, 4], "
    "target_shape: [4], batch_size: 2, n_epochs: 1}\nmodel: {name: cosmoflow, input_shape: [32, "
    "32, 32, 4], conv_size: 4}\noptimizer: {name: Adam}\n";

std::string error_of(const std::string& text) {
  try {
    load_config_text(text, "run.yaml");
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

TEST(DeepcamTrainOrder, ReferenceIsReadPrintedAndGivesTheSamplersSeed) {
  const Config c =
      load_config_text(deepcam_config("/d", "  train_order: reference\n  seed: 333\n"), "cam.yaml");
  EXPECT_EQ(c.data.train_order, TrainOrder::reference);
  EXPECT_NE(c.resolved_yaml.find("  train_order: reference\n"), std::string::npos);
  EXPECT_EQ(load_config_text(c.resolved_yaml, "resolved.yaml").data.train_order,
            TrainOrder::reference);
  const LoaderOptions lo = loader_options(c.data);
  EXPECT_EQ(lo.order, TrainOrder::reference);
  EXPECT_EQ(lo.seed, 0u);  // DistributedSampler's seed, not data.seed (which seeds the weights)
  const LoaderOptions vo = validation_loader_options(c.data);
  EXPECT_EQ(vo.order, TrainOrder::crest);  // validation keeps the reference's contiguous shards
  EXPECT_FALSE(vo.shuffle);
}

TEST(DeepcamTrainOrder, CrestIsTheDefaultAndOnlyDeepcamPrintsIt) {
  const Config cam = load_config_text(deepcam_config("/d", "  seed: 5\n"), "cam.yaml");
  EXPECT_EQ(cam.data.train_order, TrainOrder::crest);
  EXPECT_NE(cam.resolved_yaml.find("  train_order: crest\n"), std::string::npos);
  EXPECT_EQ(loader_options(cam.data).seed, 5u);
  const Config dummy = load_config_text(kDummyConfig, "dummy.yaml");
  EXPECT_EQ(dummy.resolved_yaml.find("train_order"), std::string::npos);
}

TEST(DeepcamTrainOrder, OtherDatasetsAndShuffleOffAreRefusedNamingTheKey) {
  std::string text = kDummyConfig;
  text.insert(text.find("batch_size"), "train_order: reference, ");
  const std::string other = error_of(text);
  EXPECT_NE(other.find("data.train_order"), std::string::npos) << other;
  EXPECT_NE(other.find("deepcam"), std::string::npos) << other;
  for (const char* key : {"shuffle", "shuffle_train"}) {
    const std::string off = error_of(
        deepcam_config("/d", "  train_order: reference\n  " + std::string(key) + ": false\n"));
    EXPECT_NE(off.find(std::string("data.") + key), std::string::npos) << off;
    EXPECT_NE(off.find("train_order: reference"), std::string::npos) << off;
  }
  const std::string bad = error_of(deepcam_config("/d", "  train_order: torch\n"));
  EXPECT_NE(bad.find("data.train_order"), std::string::npos) << bad;
}

TEST(DeepcamTrainOrder, AMidEpochResumeKeepsTheOrder) {
  const Config saved = load_config_text(deepcam_config("/d", "  train_order: reference\n"), "a");
  const Config crest_order = load_config_text(deepcam_config("/d"), "b");
  CheckpointInfo info;
  info.position.epoch = 1;
  info.position.step_in_epoch = 2;
  info.ranks = 1;
  info.batch_size = 2;
  info.steps_per_epoch = 5;
  info.config_yaml = saved.resolved_yaml;
  EXPECT_EQ(resume_position_problem(info, saved, 1, 5), "");
  const std::string changed = resume_position_problem(info, crest_order, 1, 5);
  EXPECT_NE(changed.find("data.train_order must stay reference (now crest)"), std::string::npos)
      << changed;
  // A checkpoint written before the key existed trained in crest's order.
  std::string old = crest_order.resolved_yaml;
  old.erase(old.find("  train_order: crest\n"), std::string("  train_order: crest\n").size());
  info.config_yaml = old;
  EXPECT_EQ(resume_position_problem(info, crest_order, 1, 5), "");
  EXPECT_NE(resume_position_problem(info, saved, 1, 5), "");
  info.position.step_in_epoch = 0;  // at an epoch boundary the order may change
  EXPECT_EQ(resume_position_problem(info, saved, 1, 5), "");
}

// The fixture's "trained 11 3 2 EPOCH RANK" lines: the sorted indices each rank trains on.
std::vector<int64_t> reference_trained(int epoch, int rank) {
  std::ifstream in(test::source_path("tests/fixtures/deepcam_reference_order.txt"));
  const std::string head =
      "trained 11 3 2 " + std::to_string(epoch) + " " + std::to_string(rank) + " ";
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(head, 0) != 0) continue;
    std::istringstream s(line.substr(head.size()));
    int64_t count = 0;
    uint64_t checksum = 0;
    s >> count >> checksum;
    std::vector<int64_t> v;
    for (int64_t x; s >> x;) v.push_back(x);
    EXPECT_EQ(static_cast<int64_t>(v.size()), count);
    return v;
  }
  ADD_FAILURE() << "no fixture line " << head;
  return {};
}

TEST(DeepcamTrainOrder, TheLoaderHandsEachRankTheReferencesFilesInOrder) {
  test::ScratchDir dir;
  DatagenOptions g;
  g.family = "deepcam";
  g.format = "hdf5";
  g.out = dir.file("data");
  g.n_train = 11;
  g.n_valid = 1;
  g.height = g.width = 16;
  g.threads = 1;
  std::ostringstream quiet;
  generate_dataset(g, quiet);
  // The reference's file list: the names, sorted as Python sorts str.
  std::vector<std::string> sorted;
  for (const auto& e : std::filesystem::directory_iterator(dir.file("data/train")))
    sorted.push_back(e.path().filename().string());
  std::sort(sorted.begin(), sorted.end());
  ASSERT_EQ(sorted.size(), 11u);

  const Config c = load_config_text(
      deepcam_config(dir.file("data"), "  train_order: reference\n  n_parallel_reads: 2\n"),
      "cam.yaml");
  test::FakeCommunicator world(0, 1);
  const TrainingData data = open_training_data(c, world, quiet);
  for (int rank = 0; rank < 3; ++rank) {
    test::FakeCommunicator comm(rank, 3);
    DataLoader loader(data.train, loader_options(c.data), comm);
    ASSERT_EQ(loader.plan().batches, 1);  // floor(floor(11 / 3) / 2), as the reference
    for (int epoch = 0; epoch < 3; ++epoch) {
      loader.start_epoch(epoch);
      std::vector<std::string> got, want;
      const LoadedBatch b = loader.next();
      for (int64_t id : b.sample_ids)
        got.push_back(std::filesystem::path(data.train->path(id)).filename().string());
      loader.release(b);
      for (int64_t index : reference_trained(epoch, rank))
        want.push_back(sorted[static_cast<size_t>(index)]);
      EXPECT_EQ(got, want) << "rank " << rank << ", epoch " << epoch;
    }
  }
}

}  // namespace
}  // namespace crest
