// crest train with every sample split spatially (dist.spatial) under mpirun: 2- and 4-way
// splits along one and two axes, and 2 data-parallel groups x 2 spatial ranks, against one
// process with the same global batch — every weight, the loss and the metrics; resuming under
// another decomposition; and the decompositions refused before any training.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "support/cli_util.hpp"
#include "support/scoped_env.hpp"
#include "support/test_util.hpp"
#include "support/weights_compare.hpp"

namespace crest {
namespace {

using test::CliRun;
using test::run_crest;
using test::run_crest_mpi;
using test::TempDir;
using test::whole_relative_difference;
using test::worst_relative_difference;

const std::string kDemo = std::string(CREST_SOURCE_DIR) + "/configs/cosmoflow-demo.yaml";

// CosmoFlow's conv stack cut to 3 layers on 32 x 8 x 8 volumes, float64 on the reference
// backend: three steps of global batch 2 per epoch, sorted order, no dropout.
std::string float64_args(int local_batch) {
  return "train --config " + kDemo +
         " data.n_train=6 data.n_valid=2 data.shuffle=false model.dropout=0 crest.threads=1"
         " data.sample_shape=[32,8,8,4] model.n_conv_layers=3 crest.backend=reference"
         " crest.precision=float64 data.batch_size=" +
         std::to_string(local_batch);
}

// "final loss L, val_mae M" (or another metric) of the run's summary line: the loss and the
// metric, reduced over the data-parallel shards, must be those of one process.
std::string final_metrics(const std::string& out, const std::string& metric = "val_mae") {
  std::smatch m;
  return std::regex_search(out, m, std::regex("final loss [0-9.]+, " + metric + " [0-9.]+"))
             ? m.str()
             : "";
}

// The values of every MLPerf log event `key` the run echoed (mlperf.stdout), in order.
std::vector<std::string> mllog_values(const std::string& out, const std::string& key) {
  std::vector<std::string> values;
  const std::regex event("\"key\": \"" + key + "\", \"value\": ([-0-9.e]+)");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), event); it != std::sregex_iterator();
       ++it)
    values.push_back((*it)[1]);
  return values;
}

// Whether the run directory holds any checkpoint file.
bool holds_a_checkpoint(const std::string& run) {
  const std::filesystem::path dir = run + "/checkpoints";
  if (!std::filesystem::exists(dir)) return false;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".safetensors") return true;
  return false;
}

struct Split {
  int ranks;
  std::string parts;
  int local_batch;    // global batch / data-parallel groups
  std::string extra;  // more overrides ("dist.halo_overlap=always")
};

// Trains `args(local batch)` on one process (local batch `one_batch`), then under each split, and
// expects each split run to train as the one process did: every weight within `tol`, the same
// final loss and `metric`, and the same values of each MLPerf log event in `mllog_keys` (the runs
// echo their log: mlperf.stdout). Biases are held to `bias_tol` where it is given (float32: a
// bias's gradient is a sum that nearly cancels, so its rounding is large against its size).
// Returns the split runs' output.
std::vector<std::string> expect_splits_train_as_one_process(
    const std::function<std::string(int)>& args, int one_batch, const std::vector<Split>& splits,
    double tol, const std::string& metric = "val_mae",
    const std::vector<std::string>& mllog_keys = {}, double bias_tol = 0) {
  TempDir dir;
  const std::string one_w = dir.file("one.safetensors");
  const auto one =
      run_crest(args(one_batch) + " --save-weights " + one_w + " output_dir=" + dir.file("1"));
  EXPECT_EQ(one.code, 0) << one.out;
  EXPECT_FALSE(final_metrics(one.out, metric).empty()) << one.out;
  for (const std::string& key : mllog_keys) EXPECT_FALSE(mllog_values(one.out, key).empty()) << key;
  std::vector<std::string> outs;
  for (const Split& s : splits) {
    SCOPED_TRACE(std::to_string(s.ranks) + " ranks, dist.spatial " + s.parts + " " + s.extra);
    const std::string w = dir.file("split.safetensors");
    // A generous limit: 4 ranks share 2 cores here, beside the other tests of a ctest -j2.
    const auto r =
        run_crest_mpi(s.ranks,
                      args(s.local_batch) + " dist.spatial=" + s.parts + " " + s.extra +
                          " --overwrite --save-weights " + w + " output_dir=" + dir.file("split"),
                      600);
    EXPECT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("each sample split among"), std::string::npos) << r.out;
    const auto is_bias = [](const std::string& name) {
      return name.size() > 5 && name.compare(name.size() - 5, 5, ".bias") == 0;
    };
    EXPECT_LE(
        worst_relative_difference(one_w, w, [&](const std::string& n) { return !is_bias(n); }),
        tol);
    EXPECT_LE(worst_relative_difference(one_w, w, is_bias), bias_tol > 0 ? bias_tol : tol);
    EXPECT_EQ(final_metrics(one.out, metric), final_metrics(r.out, metric)) << r.out;
    for (const std::string& key : mllog_keys)
      EXPECT_EQ(mllog_values(one.out, key), mllog_values(r.out, key)) << key;
    outs.push_back(r.out);
  }
  return outs;
}

TEST(SpatialTrain, Float64EveryDecompositionTrainsAsOneProcess) {
  expect_splits_train_as_one_process(
      [](int b) { return float64_args(b) + " data.n_epochs=1"; }, 2,
      {Split{2, "[2,1,1]", 2, ""}, Split{4, "[4,1,1]", 2, ""}, Split{4, "[1,2,2]", 2, ""},
       Split{4, "[2,1,1]", 1, ""}, Split{2, "[2,1,1]", 2, "dist.halo_overlap=always"},
       Split{4, "[4,1,1]", 2, "dist.halo_overlap=always"}},
      1e-10);
}

// The dense head's weight is divided among the group: whatever needs its whole tensor adds the
// parts' sums of squares over the group — the L2 penalty (model.l2, in the loss), LARS's trust
// ratio per tensor, and LAMB's trust ratios and its global gradient norm (max_grad_norm small
// enough that every step clips) — so a split run trains as one process, with and without data
// parallelism.
TEST(SpatialTrain, NormsOfTheDividedDenseWeightAreTheWholeTensors) {
  for (const std::string optimizer :
       {"optimizer.name=LARS",
        "optimizer.name=LAMB optimizer.momentum=null optimizer.max_grad_norm=0.01"}) {
    SCOPED_TRACE(optimizer);
    expect_splits_train_as_one_process(
        [&](int b) { return float64_args(b) + " data.n_epochs=1 model.l2=0.01 " + optimizer; }, 2,
        {Split{2, "[2,1,1]", 2, ""}, Split{4, "[2,1,1]", 1, ""}}, 1e-10);
  }
}

// train.report under a split: each split layer's row in report.json carries its halo exchange
// (how it runs, milliseconds per training step exchanged and waited, the hidden fraction); the
// layers every rank runs whole carry none.
TEST(SpatialTrain, TheReportGivesEverySplitLayersHaloExchange) {
  TempDir dir;
  const std::string run = dir.file("run");
  const auto r = run_crest_mpi(2, float64_args(2) +
                                      " data.n_epochs=2 dist.spatial=[2,1,1] "
                                      "dist.halo_overlap=always train.report=true output_dir=" +
                                      run);
  ASSERT_EQ(r.code, 0) << r.out;
  std::ifstream in(run + "/report.json");
  const nlohmann::json report = nlohmann::json::parse(in);
  int overlapped = 0;
  for (const auto& layer : report["layers"]) {
    const std::string name = layer["name"];
    if (name.rfind("fc", 0) == 0) {
      EXPECT_FALSE(layer.contains("halo")) << name;
    }
    if (name.rfind("conv", 0) != 0) continue;
    ASSERT_TRUE(layer.contains("halo")) << name;
    const auto& h = layer["halo"];
    EXPECT_EQ(h["overlap"].get<std::string>().rfind("overlapped", 0), 0u) << h.dump();
    overlapped++;
    const double exchange = h["exchange_ms"], exposed = h["exposed_ms"];
    const double hidden = h["hidden_fraction"];
    EXPECT_GT(exchange, 0) << name;
    EXPECT_GE(exposed, 0) << name;
    EXPECT_LE(exposed, exchange * (1 + 1e-9)) << name;
    EXPECT_GE(hidden, 0) << name;
    EXPECT_LE(hidden, 1) << name;
  }
  EXPECT_EQ(overlapped, 3);  // conv1 to conv3
  std::ifstream html(run + "/report.html");
  std::stringstream page;
  page << html.rdbuf();
  EXPECT_NE(page.str().find("halo-table"), std::string::npos);
}

// CosmoFlow's full conv stack (5 layers, 4 -> 64 channels) on 64^3 volumes, float64 on the
// reference backend: deep enough that the last pooled volumes (4^3, 2^3) are too small for 4
// parts and run gathered, while the first layers run split. Three steps of global batch 2.
TEST(SpatialTrain, Float64At64CubedTrainsAsOneProcess) {
  const auto args = [](int local_batch) {
    return "train --config " + kDemo +
           " data.n_train=6 data.n_valid=2 data.shuffle=false model.dropout=0 crest.threads=1"
           " data.sample_shape=[64,64,64,4] model.input_shape=[64,64,64,4] model.conv_size=4"
           " model.n_conv_layers=5 crest.backend=reference crest.precision=float64"
           " data.n_epochs=1 data.batch_size=" +
           std::to_string(local_batch);
  };
  expect_splits_train_as_one_process(
      args, 2, {Split{2, "[2,1,1]", 2, ""}, Split{4, "[4,1,1]", 2, ""}, Split{4, "[2,1,1]", 1, ""}},
      1e-10);
}

// The demo's full CosmoFlow stack (channels 32 to 512 on 32^3) in float32 on oneDNN, whose
// kernel choice differs between ranks of one group at these channel counts. Three steps of global
// batch 4.
TEST(SpatialTrain, Float32OnOneDnnAtCosmoFlowChannelCountsTrainsAsOneProcess) {
  // Asked of the registry, not of a probe run: a run failing for another reason fails the test.
  CREST_SKIP_WITHOUT_BACKEND("onednn");
  const auto args = [](int local_batch) {
    return "train --config " + kDemo +
           " data.n_train=12 data.n_valid=4 data.n_epochs=1 data.shuffle=false model.dropout=0"
           " crest.threads=1 data.batch_size=" +
           std::to_string(local_batch);
  };
  // Both sides on oneDNN's direct kernels: a split convolution computes its bias gradient, which
  // Winograd does not take, so the one process would otherwise run conv2 to conv5 as Winograd
  // (rounding about 2e-5 relative, which the near-cancelling sums of conv1's and conv2's bias
  // gradients amplify to 1.8e-3; docs/architecture.md). This compares the split, not the kernels.
  // The biases within 1e-4: with the halos overlapped, a boundary row's output comes from the
  // boundary kernels and its input gradient adds the whole kernel's and the boundary pieces'
  // partial sums, so the gradient reaching conv1 rounds differently there, and conv1's bias
  // gradient, a sum of it over 131,072 positions per channel that nearly cancels, carries that
  // rounding far above its size (measured: conv1's bias 6.0e-5 from one process after the third
  // step, 6e-8 absolute, and 7e-7 after the first two; every weight, and every bias of the splits
  // exchanged first, at most 6e-7; float64 splits overlapped alike agree within 1e-10).
  const test::ScopedEnv direct("CREST_WINOGRAD", "0");
  expect_splits_train_as_one_process(args, 4,
                                     {Split{4, "[4,1,1]", 4, ""}, Split{4, "[2,1,1]", 2, ""},
                                      Split{4, "[2,1,1]", 2, "dist.halo_overlap=always"}},
                                     1e-5, "val_mae", {}, 1e-4);
}

// Each rank reads its block of every sample: from npy files only the block's bytes, from GZIP
// TFRecords the whole record (inflated whole, the block kept). Either way the run is one
// process's.
TEST(SpatialTrain, EachRankReadsItsBlockOfTheSampleFiles) {
  TempDir dir;
  for (const std::string format : {"npy", "tfrecord"}) {
    SCOPED_TRACE(format);
    const std::string data = dir.file(format);
    ASSERT_EQ(
        run_crest("datagen cosmoflow --format " + format + (format == "tfrecord" ? " --gzip" : "") +
                  " --train 4 --valid 2 --size 32 --out " + data)
            .code,
        0);
    std::string args = "train --config " + std::string(CREST_SOURCE_DIR) +
                       "/configs/cosmoflow.yaml data.data_dir=" + data + " data.format=" + format +
                       (format == "tfrecord" ? " data.compression=GZIP" : "") +
                       " data.n_train=4 data.n_valid=2 data.batch_size=2 data.n_epochs=1"
                       " data.shuffle=false model.dropout=0 crest.threads=1"
                       " data.sample_shape=[32,32,32,4] model.input_shape=[32,32,32,4]"
                       " model.conv_size=4 model.n_conv_layers=3 crest.backend=reference"
                       " crest.precision=float64";
    const auto outs = expect_splits_train_as_one_process(
        [&](int) -> std::string { return args; }, 2,
        {Split{2, "[2,1,1]", 2, ""}, Split{4, "[1,2,2]", 2, ""}}, 1e-10);
    for (const std::string& out : outs)
      EXPECT_NE(out.find(format == "npy" ? "each rank reads its block of every sample (only the "
                                           "block's bytes)"
                                         : "(cosmoflow-tfrecord-gzip: each rank reads and decodes "
                                           "the whole sample)"),
                std::string::npos)
          << out;
  }
}

// A reduced DeepCAM (model.width_divisor=8: every layer, kernel, stride and dilation of the
// reference with 1/8 of its widths; 32 x 48 fields) in float64 on the reference backend, three
// LAMB steps of batch 2: split along the height on 2 ranks and 2 x 2 on 4, with the halos
// overlapped, and 2 data-parallel groups x 2 ranks (batch norm synchronised over the 2 groups,
// dist.batchnorm_group_size, so its statistics are the batch's as on one process), from its first
// convolution to its last transposed one (batch norm on blocks, image pooling as the group's
// mean, the loss and the IoU of the last batch and of validation on the prediction's blocks),
// against one process: every weight within 1e-10 (measured: at most 8.0e-12) and the logged IoUs,
// exactly. (The full network's float64 step takes 30 s here; the reduced one's three, 2 s.)
//
// Then float32 on oneDNN, the whole network (all 56 M parameters), one LAMB step: a reduced
// network's float32 runs scatter too far from float64 to check a kernel (its middle flow's batch
// norms see 12 values per channel: after three steps one float32 process is 1.7e-2 from float64
// as a whole on oneDNN, 1.4e-2 on the reference backend). After a LAMB step some single tensors
// still differ by 24-29 % between any two float32 runs, split or not (batch norm's biases: their
// gradients nearly cancel, and LAMB's trust ratio makes the step a fixed size whatever its
// direction), so each split is held to a float64 run as a whole: measured whole-model distance
// 6.9e-5 for [2,1] and [2,2] against 8.2e-5 for one float32 process; a split may be at most 2x
// as far as one process.
TEST(SpatialTrain, DeepCamSplitTrainsAsOneProcess) {
  TempDir dir;
  const std::string data = dir.file("data");
  ASSERT_EQ(
      run_crest("datagen deepcam --train 6 --valid 2 --height 32 --width 48 --out " + data).code,
      0);
  const std::string reduced =
      "train --config " + std::string(CREST_SOURCE_DIR) + "/configs/deepcam-demo.yaml" +
      " data.data_dir=" + data +
      " data.sample_shape=[32,48,16] data.n_epochs=1 data.shuffle=false model.width_divisor=8"
      " crest.threads=1";
  const std::string args =
      reduced + " crest.backend=reference crest.precision=float64 mlperf.stdout=true";
  expect_splits_train_as_one_process(
      [&](int b) -> std::string { return args + " data.batch_size=" + std::to_string(b); }, 2,
      {Split{2, "[2,1]", 2, ""}, Split{4, "[2,2]", 2, ""},
       Split{2, "[2,1]", 2, "dist.halo_overlap=always"},
       Split{4, "[2,1]", 1, "dist.batchnorm_group_size=2"}},
      1e-10, "val_iou", {"train_accuracy", "eval_accuracy"});

  const std::string whole = "train --config " + std::string(CREST_SOURCE_DIR) +
                            "/configs/deepcam-demo.yaml data.data_dir=" + data +
                            " data.sample_shape=[32,48,16] data.n_train=2 data.batch_size=2"
                            " data.n_epochs=1 data.shuffle=false crest.threads=1";
  const std::string float64_whole_w = dir.file("float64-whole.safetensors");
  const auto float64_whole =
      run_crest(whole + " crest.backend=reference crest.precision=float64 --save-weights " +
                float64_whole_w + " output_dir=" + dir.file("one64"));
  ASSERT_EQ(float64_whole.code, 0) << float64_whole.out;
  const std::string float32 = whole + " crest.backend=onednn";
  CREST_SKIP_WITHOUT_BACKEND("onednn");
  const std::string one_w = dir.file("one32.safetensors");
  const auto one =
      run_crest(float32 + " --save-weights " + one_w + " output_dir=" + dir.file("one32"));
  ASSERT_EQ(one.code, 0) << one.out;
  const double one_distance = whole_relative_difference(float64_whole_w, one_w);
  EXPECT_LT(one_distance, 1e-3);
  for (const auto& [ranks, parts] : {std::pair<int, std::string>{2, "[2,1]"}, {4, "[2,2]"}}) {
    const std::string w = dir.file("split32.safetensors");
    const auto r =
        run_crest_mpi(ranks,
                      float32 + " dist.spatial=" + parts + " --overwrite --save-weights " + w +
                          " output_dir=" + dir.file("split32"),
                      600);
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_LE(whole_relative_difference(float64_whole_w, w), 2 * one_distance) << parts;
  }
}

// The Tiramisu reduced to three blocks (5x5 'same' convolutions, dense concatenations, stride-2
// 1x1 transitions down, TensorFlow-'same' transposed convolutions up, dropout on every layer and
// on the logits) in float64 on the reference backend, three LARC-Adam steps of batch 2: split
// along the height on 2 ranks and 2 x 2 on 4, against one process: every weight within 1e-10
// (measured 1.0e-15 for [2,1]) and the validation IoU exactly. Dropout's masks are drawn per
// position of the whole sample, so a split draws the same. Then 2 data-parallel groups of a
// width split without dropout (data-parallel ranks draw the masks of their local batch
// positions, so with dropout they reproduce a one-process run only at one sample per step).
TEST(SpatialTrain, TiramisuSplitTrainsAsOneProcess) {
  TempDir dir;
  const std::string data = dir.file("data");
  ASSERT_EQ(
      run_crest("datagen deepcam --train 6 --valid 2 --height 32 --width 48 --out " + data).code,
      0);
  const std::string args =
      "train --config " + std::string(CREST_SOURCE_DIR) + "/configs/tiramisu-demo.yaml" +
      " data.data_dir=" + data +
      " data.sample_shape=[32,48,16] data.n_epochs=1 data.shuffle=false model.blocks=[2,2,3]"
      " model.growth_rate=4 model.initial_filters=8 crest.threads=1 crest.backend=reference"
      " crest.precision=float64";
  expect_splits_train_as_one_process(
      [&](int b) -> std::string { return args + " data.batch_size=" + std::to_string(b); }, 2,
      {Split{2, "[2,1]", 2, ""}, Split{4, "[2,2]", 2, ""}}, 1e-10, "val_iou");
  expect_splits_train_as_one_process(
      [&](int b) -> std::string {
        return args + " model.dropout=0 data.batch_size=" + std::to_string(b);
      },
      2, {Split{4, "[1,2]", 1, ""}}, 1e-10, "val_iou");
}

// Whether `staged` holds exactly the source's depth rows [begin, end) of every volume in
// `source`/train (zeros elsewhere: holes), at the source's size, and its labels whole.
void expect_staged_rows(const std::string& source, const std::string& staged, int64_t begin,
                        int64_t end) {
  const int64_t row = int64_t{32} * 32 * 4 * 2;  // one depth row of a [32, 32, 32, 4] int16 volume
  int volumes = 0;
  for (const auto& e : std::filesystem::directory_iterator(source + "/train")) {
    const std::string name = e.path().filename().string();
    const std::string whole = test::slurp(e.path().string()),
                      part = test::slurp(staged + "/train/" + name);
    ASSERT_EQ(part.size(), whole.size()) << name;
    if (name.find(".data.npy") == std::string::npos) {
      EXPECT_EQ(part, whole) << name;
      continue;
    }
    ++volumes;
    const size_t data = whole.size() - static_cast<size_t>(32 * row);  // the header before it
    for (size_t i = 0; i < whole.size(); ++i) {
      const bool kept = i < data || (i >= data + static_cast<size_t>(begin * row) &&
                                     i < data + static_cast<size_t>(end * row));
      ASSERT_EQ(part[i], kept ? whole[i] : '\0') << name << " byte " << i;
    }
  }
  EXPECT_EQ(volumes, 4);
}

// A spatial group spanning two nodes (simulated: CREST_TEST_RANKS_PER_NODE=2, each node its own
// data.stage_dir, MPMD): each node stages only its ranks' depth rows of every volume (a sparse
// file of the source's size), the labels whole, and the run trains as one process on the
// unstaged files. A run under another decomposition is refused over that staging, naming what it
// holds: it would read zeros where the other node's rows are.
TEST(SpatialTrain, EachNodeStagesOnlyItsRanksBlocks) {
  TempDir dir;
  const std::string data = dir.file("data");
  ASSERT_EQ(
      run_crest("datagen cosmoflow --format npy --train 4 --valid 2 --size 32 --out " + data).code,
      0);
  const std::string args = "train --config " + std::string(CREST_SOURCE_DIR) +
                           "/configs/cosmoflow.yaml data.data_dir=" + data +
                           " data.format=npy data.n_train=4 data.n_valid=2 data.batch_size=2"
                           " data.n_epochs=1 data.shuffle=false model.dropout=0 crest.threads=1"
                           " data.sample_shape=[32,32,32,4] model.input_shape=[32,32,32,4]"
                           " model.conv_size=4 model.n_conv_layers=3 crest.backend=reference"
                           " crest.precision=float64";
  const std::string one_w = dir.file("one.safetensors"), split_w = dir.file("split.safetensors");
  const auto one = run_crest(args + " --save-weights " + one_w + " output_dir=" + dir.file("one"));
  ASSERT_EQ(one.code, 0) << one.out;
  const auto on_two_nodes = [&](const std::string& parts, const std::string& run) {
    std::string both;
    for (const std::string node : {"node0", "node1"})
      both += std::string(both.empty() ? "" : " : ") + "-x CREST_TEST_RANKS_PER_NODE=2 -np 2 " +
              CREST_BINARY + " " + args + " dist.spatial=" + parts +
              " data.stage_dir=" + dir.file(node) + " --save-weights " + split_w +
              " output_dir=" + dir.file(run);
    return test::run_mpirun(both, 600);
  };
  const auto r = on_two_nodes("[4,1,1]", "split");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("each node its ranks' parts (blocks [0, 8) x [0, 32) x [0, 32), [8, 16) x "
                       "[0, 32) x [0, 32) of [32, 32, 32] samples)"),
            std::string::npos)
      << r.out;
  EXPECT_LE(worst_relative_difference(one_w, split_w), 1e-10);
  EXPECT_EQ(final_metrics(one.out), final_metrics(r.out)) << r.out;
  expect_staged_rows(data, dir.file("node0"), 0, 16);
  expect_staged_rows(data, dir.file("node1"), 16, 32);
  // Each group of [2,1,1] lies within a node, which would read whole files.
  const auto other = on_two_nodes("[2,1,1]", "other");
  EXPECT_EQ(other.code, 2) << other.out;
  EXPECT_NE(other.out.find("it holds a staging of blocks [0, 8)"), std::string::npos) << other.out;
  expect_staged_rows(data, dir.file("node0"), 0, 16);
}

// Whether `staged` holds `source` but for one span of at most `rows` rows of `row` bytes, which
// is zeros there (holes: the other node's rows of an HDF5 file's climate/data, whose offset only
// libhdf5 knows), and most of those rows' bytes are cut (a float's byte is rarely 0).
void expect_one_cut_span(const std::string& source, const std::string& staged, size_t rows,
                         size_t row) {
  ASSERT_EQ(staged.size(), source.size());
  size_t first = source.size(), last = 0, cut = 0;
  for (size_t i = 0; i < source.size(); ++i) {
    if (staged[i] == source[i]) continue;
    ASSERT_EQ(staged[i], '\0') << "byte " << i;
    first = std::min(first, i);
    last = i;
    ++cut;
  }
  ASSERT_GT(cut, 0u);
  EXPECT_LT(last - first, rows * row);
  EXPECT_GT(cut, rows * row * 9 / 10);
}

// DeepCAM's files under the same two simulated nodes, [4,1]: each node stages its height rows
// ([0, 16) or [16, 32) of the 32 x 48 fields) of the npy pairs' data files and of the HDF5 files'
// climate/data (their metadata and label maps whole), the npy label maps whole, and the fused
// npy files (the label beside every pixel, read whole by every rank) whole. All three train.
TEST(SpatialTrain, DeepCamFilesAreStagedInPartWhereTheirLayoutAllows) {
  TempDir dir;
  for (const std::string layout : {"h5", "pairs", "fused"}) {
    SCOPED_TRACE(layout);
    const std::string data = dir.file(layout);
    const std::string format = layout == "h5" ? "" : " --format npy";
    ASSERT_EQ(run_crest("datagen deepcam --train 2 --valid 2 --height 32 --width 48" + format +
                        std::string(layout == "fused" ? " --fused" : "") + " --out " + data)
                  .code,
              0);
    const std::string args = "train --config " + std::string(CREST_SOURCE_DIR) +
                             "/configs/deepcam-demo.yaml data.data_dir=" + data +
                             (layout == "h5" ? "" : " data.format=npy") +
                             " data.sample_shape=[32,48,16] data.batch_size=2"
                             " data.n_epochs=1 crest.threads=1 dist.spatial=[4,1]";
    std::string both;
    for (const std::string node : {"0", "1"})
      both += std::string(both.empty() ? "" : " : ") + "-x CREST_TEST_RANKS_PER_NODE=2 -np 2 " +
              CREST_BINARY + " " + args + " data.stage_dir=" + dir.file(layout + node) +
              " output_dir=" + dir.file(layout + "-run");
    const auto r = test::run_mpirun(both, 600);
    ASSERT_EQ(r.code, 0) << r.out;
    const int64_t row = int64_t{48} * 16 * 4;  // one height row of a [32, 48, 16] float32 field
    for (const std::string node : {"0", "1"}) {
      int parts = 0;
      for (const auto& e : std::filesystem::directory_iterator(data + "/train")) {
        const std::string name = e.path().filename().string();
        const std::string whole = test::slurp(e.path().string()),
                          staged = test::slurp(dir.file(layout + node) + "/train/" + name);
        ASSERT_EQ(staged.size(), whole.size()) << name;
        if (name.rfind("data-", 0) != 0) {
          EXPECT_EQ(staged, whole) << name;  // labels, fused files
          continue;
        }
        ++parts;
        if (layout == "h5") {
          expect_one_cut_span(whole, staged, 16, static_cast<size_t>(row));
          continue;
        }
        const size_t data_at = whole.size() - static_cast<size_t>(32 * row);
        const size_t begin = data_at + static_cast<size_t>((node == "0" ? 0 : 16) * row);
        EXPECT_EQ(staged.substr(begin, 16 * row), whole.substr(begin, 16 * row)) << name;
        const size_t other = data_at + static_cast<size_t>((node == "0" ? 16 : 0) * row);
        EXPECT_EQ(staged.substr(other, 16 * row), std::string(16 * row, '\0')) << name;
      }
      EXPECT_EQ(parts, layout == "fused" ? 0 : 2);
    }
  }
}

// A rank killed in the middle of a halo exchange (its neighbour already waiting for its rows)
// ends the job: the launcher sees the death, the watchdog's deadline being the backstop; it does
// not hang (run_mpirun's limit would fail the test with 124) and writes no checkpoint.
TEST(SpatialTrain, ARankKilledMidExchangeEndsTheJob) {
  TempDir dir;
  const CliRun r = test::run_mpirun(
      "-np 2 -x CREST_TEST_KILL_IN_HALO_EXCHANGE=3@1 " + std::string(CREST_BINARY) + " " +
          float64_args(2) +
          " data.n_epochs=1 dist.spatial=[2,1,1] dist.timeout_s=60 output_dir=" + dir.file("run"),
      240);
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.code, 124) << "the job hung past the test's limit:\n" << r.out;
  EXPECT_NE(r.out.find("signal 9"), std::string::npos) << r.out;
  EXPECT_FALSE(holds_a_checkpoint(dir.file("run")));
}

// A checkpoint of a split run is an unsplit one's: 4-way spatial -> 1 rank -> 2-way spatial ->
// 2 data-parallel x 2-way spatial ends where four uninterrupted epochs on one rank do. The dense
// head's weight is divided among each group: written whole, and each rank's part taken from it
// on resume (rank 0 reads the checkpoint and sends the parts; the second group's ranks get
// theirs from their replicas).
TEST(SpatialTrain, ResumesUnderAnotherDecomposition) {
  TempDir dir;
  const std::string straight_w = dir.file("straight.safetensors");
  const auto straight = run_crest(float64_args(2) + " data.n_epochs=4 --save-weights " +
                                  straight_w + " output_dir=" + dir.file("straight"));
  ASSERT_EQ(straight.code, 0) << straight.out;
  const std::string run = dir.file("run");
  const auto four =
      run_crest_mpi(4, float64_args(2) + " data.n_epochs=1 dist.spatial=[4,1,1] output_dir=" + run);
  ASSERT_EQ(four.code, 0) << four.out;
  // The resumed config is the run's own (dist.spatial [4,1,1]): null restores one part per axis.
  const auto one = run_crest("train --resume " + run + " data.n_epochs=2 dist.spatial=null");
  ASSERT_EQ(one.code, 0) << one.out;
  EXPECT_NE(one.out.find("resuming"), std::string::npos) << one.out;
  const auto two =
      run_crest_mpi(2, "train --resume " + run + " data.n_epochs=3 dist.spatial=[2,1,1]");
  ASSERT_EQ(two.code, 0) << two.out;
  const std::string resumed_w = dir.file("resumed.safetensors");
  const auto mixed = run_crest_mpi(4, "train --resume " + run +
                                          " data.n_epochs=4 data.batch_size=1 dist.spatial=[2,1,1]"
                                          " --save-weights " +
                                          resumed_w);
  ASSERT_EQ(mixed.code, 0) << mixed.out;
  EXPECT_LE(worst_relative_difference(straight_w, resumed_w), 1e-10);
  EXPECT_EQ(final_metrics(straight.out), final_metrics(mixed.out)) << mixed.out;
}

void expect_refused(const test::CliRun& r, const std::string& message) {
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find(message), std::string::npos) << r.out;
}

TEST(SpatialTrain, RefusesADecompositionBeforeAnyTraining) {
  TempDir dir;
  const std::string base = float64_args(2) + " data.n_epochs=1 output_dir=" + dir.file("run");
  expect_refused(run_crest_mpi(2, base + " dist.spatial=[3,1,1]"),
                 "dist.spatial: [3, 1, 1] splits each sample among 3 ranks, which does not "
                 "divide the job's 2 ranks");
  expect_refused(run_crest(base + " dist.spatial=[2,1]"),
                 "dist.spatial (from override 'dist.spatial=[2,1]'): expected 3 parts [d, h, w], "
                 "one per spatial axis of the samples");
  expect_refused(run_crest(base + " dist.spatial=[0,1,1]"), "dist.spatial");
  expect_refused(run_crest(base + " dist.spatial=[2,1,1] data.on_error=skip"),
                 "[2, 1, 1] with data.on_error: skip is not supported yet");
  expect_refused(run_crest(base + " dist.halo_overlap=sometimes"),
                 "dist.halo_overlap (from override 'dist.halo_overlap=sometimes'): unknown value "
                 "\"sometimes\" (expected auto, always or off)");
  // 8 rows per rank along depth cannot feed a 19-wide kernel's 9-row halo.
  expect_refused(run_crest_mpi(4, base + " dist.spatial=[4,1,1] model.kernel_size=19"),
                 "dist.spatial: layer 'conv1' split 4 ways along depth (input extent 32, output "
                 "extent 32, kernel 19");
  EXPECT_FALSE(holds_a_checkpoint(dir.file("run")));
}

// --dry-run under a split prints every rank's block, planned memory and halo traffic.
TEST(SpatialTrain, DryRunPrintsEveryRanksPlan) {
  const auto r = run_crest_mpi(
      4, "train --config " + kDemo + " dist.spatial=[4,1,1] crest.threads=1 --dry-run");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("per-rank plan (dist.spatial [4, 1, 1]"), std::string::npos) << r.out;
  // Rank, group, the 32^3 sample's block of 8 rows, memory, halo forward + backward.
  const std::regex row(
      R"(\n +([0-9]) +0  \[8, 32, 32\] +[0-9.]+ MiB  ([0-9.]+) ([KM])iB \+ [0-9.]+ [KM]iB)");
  std::vector<double> forward_kib;
  for (auto it = std::sregex_iterator(r.out.begin(), r.out.end(), row);
       it != std::sregex_iterator(); ++it)
    forward_kib.push_back(std::stod((*it)[2].str()) * ((*it)[3].str() == "M" ? 1024 : 1));
  ASSERT_EQ(forward_kib.size(), 4u) << r.out;
  // The edge ranks receive from one neighbour, the middle ones from two.
  EXPECT_GT(forward_kib[0], 0) << r.out;
  EXPECT_EQ(forward_kib[0], forward_kib[3]) << r.out;
  EXPECT_EQ(forward_kib[1], 2 * forward_kib[0]) << r.out;
  EXPECT_EQ(forward_kib[2], forward_kib[1]) << r.out;
  // How many of each rank's 5 convolutions and pools with a halo overlap it: none by default at
  // 8 rows per rank (a boundary above 1/32), every convolution whose interior is not empty with
  // always.
  const std::regex overlap(R"(\n +[0-9] +0  \[8, 32, 32\].*  ([0-9]+) of ([0-9]+)\n)");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, overlap)) << r.out;
  EXPECT_EQ(m[1].str(), "0") << r.out;
  const auto always = run_crest_mpi(4, "train --config " + kDemo +
                                           " dist.spatial=[4,1,1] dist.halo_overlap=always "
                                           "crest.threads=1 --dry-run");
  ASSERT_EQ(always.code, 0) << always.out;
  ASSERT_TRUE(std::regex_search(always.out, m, overlap)) << always.out;
  EXPECT_GT(std::stoi(m[1].str()), 0) << always.out;
  EXPECT_LE(std::stoi(m[1].str()), std::stoi(m[2].str())) << always.out;
}

// A plan above crest.max_memory_gb (by default the node's available memory over its ranks) is
// refused before its arena is allocated, with the figures, and leaves no checkpoint.
TEST(SpatialTrain, APlanAboveTheMemoryLimitIsRefusedBeforeAllocating) {
  TempDir dir;
  const auto r = run_crest("train --config " + kDemo +
                           " crest.max_memory_gb=0.05 output_dir=" + dir.file("run"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("crest.max_memory_gb 0.05: the compiled program needs"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("but may use 51.2 MiB; split the samples among more ranks (dist.spatial)"),
            std::string::npos)
      << r.out;
  EXPECT_FALSE(holds_a_checkpoint(dir.file("run")));
  // Split 4 ways the same limit still refuses (the head and the gathered layers are whole), and
  // the dry run, which allocates nothing, refuses it too.
  const auto split = run_crest_mpi(
      4, "train --config " + kDemo + " crest.max_memory_gb=0.05 dist.spatial=[4,1,1] --dry-run");
  EXPECT_EQ(split.code, 2) << split.out;
  EXPECT_NE(split.out.find("crest.max_memory_gb 0.05"), std::string::npos) << split.out;
}

// The activations and kernel scratch a rank plans (rank 0's "planned memory" line), in MiB.
double planned_activation_mib(const std::string& out) {
  std::smatch m;
  if (!std::regex_search(out, m, std::regex("activations and kernel scratch ([0-9.]+) (MiB|GiB)")))
    return -1;
  return std::stod(m[1]) * (m[2] == "GiB" ? 1024 : 1);
}

// Splitting a 128^3 CosmoFlow sample is for its memory: a rank of a 2-way split plans at most 3/4
// of one process's activations and kernel scratch, of a 4-way split at most half (measured 0.66
// and 0.39 with AVX-512, 0.52 and 0.32 capped to AVX2). A split convolution's scratch (its window,
// the kernel-format copies, the kernel's own) is the largest single request; the input gradient's
// working memory shares it (only its output-gradient window outlives the weight gradient), which
// took the 2-way split from 0.93 to 0.66.
TEST(SpatialTrain, EachRankPlansLittleMoreThanItsShareOfTheActivations) {
  const std::string args = "train --config " + kDemo +
                           " data.sample_shape=[128,128,128,4] model.input_shape=[128,128,128,4]"
                           " data.batch_size=1 crest.threads=1 --dry-run";
  const auto one = run_crest(args);
  ASSERT_EQ(one.code, 0) << one.out;
  const double whole = planned_activation_mib(one.out);
  ASSERT_GT(whole, 0) << one.out;
  for (const auto& [ranks, parts, most] : std::vector<std::tuple<int, std::string, double>>{
           {2, "[2,1,1]", 0.75}, {4, "[4,1,1]", 0.5}}) {
    const auto split = run_crest_mpi(ranks, args + " dist.spatial=" + parts);
    ASSERT_EQ(split.code, 0) << split.out;
    EXPECT_LE(planned_activation_mib(split.out), most * whole) << parts << "\n" << split.out;
  }
}

}  // namespace
}  // namespace crest
