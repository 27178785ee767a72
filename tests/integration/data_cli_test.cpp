// The data tools end to end through the binary: datagen writes what validate accepts and inspect
// describes; existing data is never overwritten unless asked; validate lists every damaged file
// with its defect; staging copies verified files, reuses a complete staging and refuses to write
// over anything else; training reads the generated files, and a bad sample stops the run (fail)
// or is dropped and counted (skip); bench loader runs on datagen's output with no config.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "crest/data/formats/npy.hpp"
#include "support/cli_util.hpp"
#include "support/test_util.hpp"

namespace crest {
namespace {

using test::run_crest;
using test::TempDir;
namespace fs = std::filesystem;

std::vector<char> slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void flip_byte(const std::string& path, size_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.get(c);
  f.seekp(static_cast<std::streamoff>(offset));
  f.put(static_cast<char>(c ^ 0x5A));
}

std::string cosmo_dataset(const TempDir& t, const std::string& extra = "--gzip") {
  const std::string dir = t.file("cosmo");
  const auto r = run_crest("datagen cosmoflow --out " + dir +
                           " --train 8 --valid 4 --size 32 --seed 3 " + extra);
  EXPECT_EQ(r.code, 0) << r.out;
  return dir;
}

// This test process's run directory (removed at exit); --overwrite: tests train several times.
const TempDir kRuns;
const std::string kTrainOnFiles = "train --config " +
                                  test::source_path("configs/cosmoflow-demo.yaml") +
                                  " data.name=cosmo data.n_train=8 data.n_valid=4 data.n_epochs=1 "
                                  "data.apply_log=true model.conv_size=4 "
                                  "crest.threads=2 --overwrite output_dir=" +
                                  kRuns.file("run");

TEST(DataCli, DatagenOutputValidatesAndInspects) {
  TempDir t;
  const std::string dir = cosmo_dataset(t);
  EXPECT_EQ(fs::file_size(dir + "/train/sample-000000.tfrecord") > 0, true);
  auto v = run_crest("validate " + dir);
  ASSERT_EQ(v.code, 0) << v.out;
  EXPECT_NE(v.out.find("12 good samples"), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("cosmoflow-tfrecord-gzip"), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("[32, 32, 32, 4]"), std::string::npos) << v.out;
  auto i = run_crest("inspect " + dir + "/validation/sample-000001.tfrecord");
  ASSERT_EQ(i.code, 0) << i.out;
  EXPECT_NE(i.out.find("tf.train.Example"), std::string::npos) << i.out;
  EXPECT_NE(i.out.find("262,144 bytes"), std::string::npos) << i.out;  // 32^3 x 4 x int16
  // Deterministic: the same seed gives the same bytes.
  TempDir t2;
  const std::string again = cosmo_dataset(t2);
  EXPECT_EQ(slurp(dir + "/train/sample-000005.tfrecord"),
            slurp(again + "/train/sample-000005.tfrecord"));
}

TEST(DataCli, DatagenNeverOverwritesUnlessAsked) {
  TempDir t;
  const std::string dir = cosmo_dataset(t);
  const auto before = slurp(dir + "/train/sample-000000.tfrecord");
  auto r = run_crest("datagen cosmoflow --out " + dir + " --train 8 --valid 4 --size 32 --seed 99");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--overwrite"), std::string::npos) << r.out;
  EXPECT_EQ(slurp(dir + "/train/sample-000000.tfrecord"), before);
  r = run_crest("datagen cosmoflow --out " + dir +
                " --train 8 --valid 4 --size 32 --seed 99 --gzip --overwrite");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(slurp(dir + "/train/sample-000000.tfrecord"), before);
  EXPECT_EQ(
      run_crest("datagen cosmoflow --out " + t.file("x") + " --train 2 --valid 0 --size 48").code,
      2);
}

TEST(DataCli, ValidateListsEveryDamagedFile) {
  TempDir t;
  const std::string dir = cosmo_dataset(t, "");  // plain TFRecords: damage is easy to place
  const std::string crc = dir + "/train/sample-000002.tfrecord";
  const std::string cut = dir + "/train/sample-000004.tfrecord";
  flip_byte(crc, 5000);
  fs::resize_file(cut, fs::file_size(cut) - 100);
  // A sample of another shape among the 32^3 ones.
  TempDir t2;
  ASSERT_EQ(
      run_crest("datagen cosmoflow --out " + t2.file("d") + " --train 1 --valid 0 --size 64").code,
      0);
  fs::copy_file(t2.file("d") + "/train/sample-000000.tfrecord",
                dir + "/validation/sample-000099.tfrecord");
  auto v = run_crest("validate " + dir);
  EXPECT_EQ(v.code, 2) << v.out;
  EXPECT_NE(v.out.find("3 bad files"), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("sample-000002.tfrecord: "), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("CRC"), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("sample-000004.tfrecord: "), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("sample-000099.tfrecord: sample shape [64, 64, 64, 4] differs"),
            std::string::npos)
      << v.out;
  // With the shape given, every 32^3 file is now the odd one out.
  v = run_crest("validate " + dir + " --sample-shape 64,64,64,4");
  EXPECT_EQ(v.code, 2);
  EXPECT_NE(v.out.find("(--sample-shape)"), std::string::npos) << v.out;
  EXPECT_EQ(run_crest("validate " + t.file("nothing-here")).code, 2);
}

TEST(DataCli, StagingCopiesVerifiesReusesAndRefuses) {
  TempDir t;
  const std::string dir = cosmo_dataset(t);
  const std::string dst = t.file("local");
  auto s = run_crest("stage --from " + dir + " --to " + dst);
  ASSERT_EQ(s.code, 0) << s.out;
  EXPECT_NE(s.out.find("every file verified"), std::string::npos) << s.out;
  for (const char* f : {"/train/sample-000000.tfrecord", "/validation/sample-000003.tfrecord"})
    EXPECT_EQ(slurp(dir + f), slurp(dst + f)) << f;
  s = run_crest("stage --from " + dir + " --to " + dst);
  ASSERT_EQ(s.code, 0) << s.out;
  EXPECT_NE(s.out.find("reusing"), std::string::npos) << s.out;
  // Something else in the destination: refused, and what is there stays.
  const std::string other = t.file("other");
  fs::create_directories(other);
  std::ofstream(other + "/keep.txt") << "mine";
  s = run_crest("stage --from " + dir + " --to " + other);
  EXPECT_EQ(s.code, 2) << s.out;
  EXPECT_EQ(slurp(other + "/keep.txt").size(), 4u);
  // Inflating gives plain TFRecords with the same records.
  const std::string plain = t.file("plain");
  ASSERT_EQ(run_crest("stage --from " + dir + " --to " + plain + " --inflate").code, 0);
  auto v = run_crest("validate " + plain);
  EXPECT_EQ(v.code, 0) << v.out;
  EXPECT_NE(v.out.find("(cosmoflow-tfrecord,"), std::string::npos) << v.out;
}

TEST(DataCli, TrainsFromTfrecordsAndNpyAndStagesFirst) {
  TempDir t;
  const std::string gz = cosmo_dataset(t);
  auto r = run_crest(kTrainOnFiles + " data.data_dir=" + gz +
                     " data.compression=GZIP data.stage_dir=" + t.file("stage"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("staged 12 files"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cosmoflow-tfrecord-gzip"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("status success"), std::string::npos) << r.out;
  // The configured compression must match the files.
  r = run_crest(kTrainOnFiles + " data.data_dir=" + gz);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("GZIP-compressed but data.compression is null"), std::string::npos) << r.out;
  const std::string npy = t.file("npy");
  ASSERT_EQ(
      run_crest("datagen cosmoflow --out " + npy + " --train 8 --valid 4 --size 32 --format npy")
          .code,
      0);
  r = run_crest(kTrainOnFiles + " data.format=npy data.data_dir=" + npy);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("cosmoflow-npy"), std::string::npos) << r.out;
  // More samples configured than there are files.
  r = run_crest(kTrainOnFiles + " data.data_dir=" + gz + " data.compression=GZIP data.n_train=50");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("holds 8 sample files but 50"), std::string::npos) << r.out;
}

TEST(DataCli, BadSampleFailsOrIsSkippedAndCounted) {
  TempDir t;
  const std::string dir = cosmo_dataset(t, "");
  // 10 training files, 8 used: the spares let skip mode fill the hole.
  TempDir t2;
  ASSERT_EQ(
      run_crest("datagen cosmoflow --out " + t2.file("d") + " --train 10 --valid 0 --size 32").code,
      0);
  const std::string train = t2.file("d");
  flip_byte(train + "/train/sample-000003.tfrecord", 7000);
  auto r =
      run_crest(kTrainOnFiles + " data.data_dir=" + train + " data.n_valid=0 data.shuffle=false");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("sample-000003.tfrecord"), std::string::npos) << r.out;
  r = run_crest(kTrainOnFiles + " data.data_dir=" + train +
                " data.n_valid=0 data.n_train=10 data.shuffle=false data.on_error=skip");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("1 bad samples skipped"), std::string::npos) << r.out;
}

TEST(DataCli, DeepcamDatagenWritesStatsAndValidatesLabels) {
  TempDir t;
  const std::string dir = t.file("cam");
  auto r =
      run_crest("datagen deepcam --out " + dir + " --train 3 --valid 1 --height 96 --width 144");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(fs::exists(dir + "/stats.h5"));
  auto v = run_crest("validate " + dir);
  EXPECT_EQ(v.code, 0) << v.out;
  EXPECT_NE(v.out.find("[96, 144, 16]"), std::string::npos) << v.out;
  auto i = run_crest("inspect " + dir + "/train/data-000000.h5");
  EXPECT_NE(i.out.find("labels_0"), std::string::npos) << i.out;
  // The npy variant, with one label file broken (a class id that does not exist).
  const std::string npy = t.file("camnpy");
  ASSERT_EQ(run_crest("datagen deepcam --out " + npy +
                      " --train 2 --valid 0 --height 32 --width 48 --format npy")
                .code,
            0);
  std::vector<float> labels(32 * 48, 0.f);
  labels[100] = 7.f;
  write_npy(npy + "/train/label-000001.npy", DType::f32, {32, 48}, labels.data());
  v = run_crest("validate " + npy);
  EXPECT_EQ(v.code, 2) << v.out;
  EXPECT_NE(v.out.find("data-000001.npy: label 7 at pixel (2, 4)"), std::string::npos) << v.out;
}

// A DeepCAM dataset at 32x48 (6 training, 3 validation samples), in `format` (hdf5, npy or npy
// with --fused), from seed 5: the same samples whatever the layout.
std::string deepcam_dataset(const TempDir& t, const std::string& name,
                            const std::string& format = "hdf5") {
  const std::string dir = t.file(name);
  const auto r =
      run_crest("datagen deepcam --out " + dir +
                " --train 6 --valid 3 --height 32 --width 48 --seed 5 --format " + format);
  EXPECT_EQ(r.code, 0) << r.out;
  return dir;
}

// A segmentation network as a graph (the DeepCAM model's inputs and loss, two small convs):
// x [16, 32, 48] channels-last, y [32, 48] int32 labels, 3 class logits, the reference's class
// weights.
std::string deepcam_graph_config(const TempDir& t, const std::string& data_dir) {
  const std::string path = t.file("deepcam-graph.yaml");
  std::ofstream(path) << "output_dir: " << t.file("deepcam-run") << R"(
data:
  name: deepcam
  data_dir_prefix: )" << data_dir
                      << R"(
  sample_shape: [32, 48, 16]
  batch_size: 2
  n_epochs: 2
  shuffle: false
model:
  name: graph
  inputs:
    - {name: x, shape: [16, 32, 48], layout: channels_last}
    - {name: y, shape: [32, 48], integer: true}
  layers:
    - {name: conv1, kind: conv, out_channels: 8, kernel: [3, 3], same: true}
    - {name: relu1, kind: relu}
    - {name: logits, kind: conv, out_channels: 3, kernel: [3, 3], same: true}
    - {name: loss, kind: softmax_cross_entropy, class_weights: [1.00173, 2.6146111, 1.7164197],
       inputs: [logits, y]}
  outputs: [logits]
  loss: loss
optimizer: {name: Adam, lr: 0.01}
crest: {threads: 2}
)";
  return path;
}

// The epoch lines of a run's output ("epoch 1/2  loss ... val_iou ..."), up to the timing.
std::string epoch_figures(const std::string& out) {
  std::istringstream in(out);
  std::string figures;
  for (std::string l; std::getline(in, l);)
    if (l.rfind("epoch ", 0) == 0) figures += l.substr(0, l.find("  lr ")) + "\n";
  return figures;
}

TEST(DataCli, DeepcamTrainsAGraphModelReportsIouAndStopsAtTheTarget) {
  TempDir t;
  const std::string cfg = deepcam_graph_config(t, deepcam_dataset(t, "cam"));
  auto r = run_crest("train --config " + cfg);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("train data: deepcam-hdf5, 6 samples: 3 batches of 2"), std::string::npos)
      << r.out;
  // Validation reads every sample: 3 samples are a full batch and a partial one.
  EXPECT_NE(r.out.find("validation data: 3 samples: 2 batches of 2 (the last one partial); every "
                       "sample is read"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("val_iou "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("done: 2 epochs"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(t.file("deepcam-run/mllog.txt")));
  // A reachable target ends the run after its first epoch, as a success.
  r = run_crest("train --config " + cfg + " --overwrite train.target_iou=0.1");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("target reached: val_iou"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(">= 0.1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("done: 1 epochs"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("status success"), std::string::npos) << r.out;
}

// NVIDIA's layouts hold the same samples as the reference's HDF5 files: training on either gives
// the same figures, bit for bit.
TEST(DataCli, DeepcamNpyLayoutsTrainExactlyAsTheHdf5Files) {
  TempDir t;
  const std::string h5 = deepcam_dataset(t, "h5");
  const std::string cfg = deepcam_graph_config(t, h5);
  const std::string args = "train --config " + cfg + " --overwrite data.n_epochs=1";
  const auto ref = run_crest(args);
  ASSERT_EQ(ref.code, 0) << ref.out;
  const std::string want = epoch_figures(ref.out);
  ASSERT_FALSE(want.empty()) << ref.out;
  for (const std::string format : {"npy", "npy --fused"}) {
    const std::string dir = deepcam_dataset(t, format == "npy" ? "pairs" : "fused", format);
    const auto v = run_crest("validate " + dir);
    EXPECT_EQ(v.code, 0) << v.out;
    EXPECT_NE(v.out.find(format == "npy" ? "deepcam-npy," : "deepcam-npy-fused,"),
              std::string::npos)
        << v.out;
    const auto r = run_crest(args + " data.format=npy data.data_dir_prefix=" + dir);
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_EQ(epoch_figures(r.out), want) << format << "\n" << r.out;
  }
}

TEST(DataCli, DeepcamDataErrorsExit2NamingTheKeyOrTheFile) {
  TempDir t;
  const std::string dir = deepcam_dataset(t, "cam");
  const std::string cfg = deepcam_graph_config(t, dir);
  const std::string args = "train --config " + cfg + " --overwrite ";
  auto r = run_crest(args + "data.channels=[0,3,16]");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("data.channels[2]"), std::string::npos) << r.out;
  r = run_crest(args + "data.sample_shape=[40,48,16]");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("data.sample_shape"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("multiples of 16"), std::string::npos) << r.out;
  // The model's input follows the selected channels: 3 selected, 16 declared.
  r = run_crest(args + "data.channels=[0,1,2]");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("data.channels"), std::string::npos) << r.out;
  fs::remove(dir + "/stats.h5");
  r = run_crest(args);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find(dir + "/stats.h5: missing"), std::string::npos) << r.out;
  // And datagen refuses sizes the network cannot take.
  r = run_crest("datagen deepcam --out " + t.file("odd") +
                " --train 1 --valid 0 --height 40 --width 48");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("multiples of 16"), std::string::npos) << r.out;
  // validate checks stats.h5 beside the splits.
  r = run_crest("validate " + dir);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("stats.h5"), std::string::npos) << r.out;
}

// The registered deepcam model reads the channels the data selects: its input_shape is
// [H, W, len(data.channels)] (the first convolution has 32 x C x 3 x 3 weights).
TEST(DataCli, TheDeepcamModelsInputFollowsTheSelectedChannels) {
  TempDir t;
  const std::string cfg = t.file("model.yaml");
  std::ofstream(cfg) << "data: {name: deepcam, data_dir: /nowhere, sample_shape: [32, 48, 16], "
                        "batch_size: 1, n_epochs: 1}\nmodel: {name: deepcam}\n"
                        "optimizer: {name: Adam}\n";
  auto all = run_crest("train --dry-run --config " + cfg);
  ASSERT_EQ(all.code, 0) << all.out;
  EXPECT_NE(all.out.find("total parameters: 56,454,720"), std::string::npos) << all.out;
  auto four = run_crest("train --dry-run --config " + cfg + " data.channels=[0,1,2,3]");
  ASSERT_EQ(four.code, 0) << four.out;
  EXPECT_NE(four.out.find("total parameters: 56,451,264"), std::string::npos)
      << four.out;  // 12 input channels fewer: 12 x 32 x 9 = 3,456 weights
}

// The JSON line `crest bench loader` prints (its log goes to stderr, run_crest merges them).
nlohmann::json bench_line(const std::string& out) {
  std::istringstream in(out);
  for (std::string l; std::getline(in, l);)
    if (!l.empty() && l[0] == '{') return nlohmann::json::parse(l);
  ADD_FAILURE() << "no JSON line in:\n" << out;
  return {};
}

// Under mpirun each rank measures on its own and names itself; data.stage_dir is staged once
// for the job (each process staging alone into the same directory raced: a rank could read a
// file another was still writing, or find the manifest of a staging it had not made).
TEST(DataCli, BenchLoaderUnderMpirunStagesOnceForAllRanks) {
  TempDir t;
  const std::string npy = t.file("npy"), staged = t.file("staged");
  ASSERT_EQ(
      run_crest("datagen cosmoflow --out " + npy + " --train 4 --valid 2 --size 32 --format npy")
          .code,
      0);
  const auto r = test::run_crest_mpi(
      2, "bench loader --data " + npy + " data.stage_dir=" + staged + " --epochs 1 --warm");
  ASSERT_EQ(r.code, 0) << r.out;
  std::vector<int> ranks;
  for (const auto& j : test::json_lines(r.out)) {
    EXPECT_EQ(j["ranks"], 2) << r.out;
    EXPECT_EQ(j["samples"], 4) << r.out;
    ranks.push_back(j["rank"].get<int>());
  }
  std::sort(ranks.begin(), ranks.end());
  EXPECT_EQ(ranks, (std::vector<int>{0, 1})) << r.out;
  EXPECT_TRUE(std::filesystem::exists(staged + "/.crest-stage.json")) << r.out;
}

// A newcomer's `crest bench loader --data DIR` on what `crest datagen` wrote: no config and no
// overrides; format, compression, sample shape and file count come from the files.
TEST(DataCli, BenchLoaderRunsOnDatagenOutputWithoutAConfig) {
  TempDir t;
  const std::string gz = cosmo_dataset(t);  // 8 training files, 32^3, GZIP
  auto r = run_crest("bench loader --data " + gz + " --epochs 1 --warm");
  ASSERT_EQ(r.code, 0) << r.out;
  nlohmann::json j = bench_line(r.out);
  EXPECT_EQ(j["format"], "cosmoflow-tfrecord-gzip") << r.out;
  EXPECT_EQ(j["samples"], 8) << r.out;
  EXPECT_EQ(j["sample_shape"], nlohmann::json({32, 32, 32, 4})) << r.out;
  EXPECT_GT(j["compression_ratio"].get<double>(), 1.0) << r.out;
  EXPECT_GT(j["samples_per_s"].get<double>(), 0.0) << r.out;

  // NVIDIA's npy variant, 64^3: the shape comes from the files, not from any default.
  const std::string npy = t.file("npy");
  ASSERT_EQ(
      run_crest("datagen cosmoflow --out " + npy + " --train 5 --valid 2 --size 64 --format npy")
          .code,
      0);
  r = run_crest("bench loader --data " + npy + " --epochs 1 --warm");
  ASSERT_EQ(r.code, 0) << r.out;
  j = bench_line(r.out);
  EXPECT_EQ(j["format"], "cosmoflow-npy") << r.out;
  EXPECT_EQ(j["samples"], 5) << r.out;
  EXPECT_EQ(j["sample_shape"], nlohmann::json({64, 64, 64, 4})) << r.out;

  // With a config (the demo's: dummy data, 32^3, 16 validation samples) the files still decide
  // the data section; the user's overrides come last and win.
  r = run_crest("bench loader --data " + npy + " --config " +
                test::source_path("configs/cosmoflow-demo.yaml") +
                " data.batch_size=2 --epochs 1 --warm");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(bench_line(r.out)["samples"], 5) << r.out;

  // Neither: a usage error that says what to give.
  r = run_crest("bench loader");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--data DIR"), std::string::npos) << r.out;
  // Not a dataset root: named, exit 2.
  r = run_crest("bench loader --data " + gz + "/train");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("no train/ directory"), std::string::npos) << r.out;
}

// `bench loader --spatial d,h,w`: one more line per rank of the group, with its block and the
// bytes it reads per sample: half of an npy sample's volume for each of 2 depth halves (the
// labels whole), the whole record from a GZIP TFRecord; a split with the wrong number of axes
// is refused.
TEST(DataCli, BenchLoaderSpatialReportsTheBytesEachRankReads) {
  TempDir t;
  const std::string npy = t.file("npy");
  ASSERT_EQ(
      run_crest("datagen cosmoflow --out " + npy + " --train 4 --valid 2 --size 32 --format npy")
          .code,
      0);
  auto r = run_crest("bench loader --data " + npy + " --epochs 1 --warm --spatial 2,1,1");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto lines = test::json_lines(r.out);
  ASSERT_EQ(lines.size(), 3u) << r.out;
  const double whole = lines[0]["payload_bytes_per_sample"].get<double>();
  EXPECT_EQ(whole, 32.0 * 32 * 32 * 4 * 2 + 4 * 4);  // int16 volume, 4 float32 targets
  for (int rank = 0; rank < 2; ++rank) {
    const auto& j = lines[static_cast<size_t>(rank) + 1];
    EXPECT_EQ(j["group_rank"], rank);
    EXPECT_EQ(j["block_begin"], nlohmann::json({16 * rank, 0, 0}));
    EXPECT_EQ(j["block_end"], nlohmann::json({16 * rank + 16, 32, 32}));
    EXPECT_TRUE(j["reads_only_block"].get<bool>());
    EXPECT_EQ(j["payload_bytes_per_sample"].get<double>(), 16.0 * 32 * 32 * 4 * 2 + 4 * 4);
  }
  const std::string gz = cosmo_dataset(t);
  r = run_crest("bench loader --data " + gz + " --epochs 1 --warm --spatial 1,1,2");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto gz_lines = test::json_lines(r.out);
  ASSERT_EQ(gz_lines.size(), 3u) << r.out;
  EXPECT_FALSE(gz_lines[1]["reads_only_block"].get<bool>());
  EXPECT_EQ(gz_lines[1]["fraction_of_whole"].get<double>(), 1.0);
  r = run_crest("bench loader --data " + npy + " --epochs 1 --spatial 2,2");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--spatial gives 2 parts"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace crest
