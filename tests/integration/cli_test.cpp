// The `crest` binary end to end: exit codes, messages naming the key and file, the dry-run
// summary, training on the dummy dataset, and weights saved and loaded through the CLI.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "support/cli_util.hpp"
#include "support/test_util.hpp"

namespace fs = std::filesystem;

namespace {

using crest::test::CliRun;
using crest::test::run_crest;
using crest::test::TempDir;
CliRun crest(const std::string& args) { return run_crest(args); }

const std::string kDemo = crest::test::source_path("configs/cosmoflow-demo.yaml");
// This test process's run directory (removed at exit): runs write checkpoints there, and a run
// replaces an earlier one's only with --overwrite.
const TempDir kRuns;
// A small, fast variant of the demo for the tests.
const std::string kSmall =
    kDemo + " data.n_train=8 data.n_valid=4 data.n_epochs=2 model.conv_size=4 crest.threads=2" +
    " --overwrite output_dir=" + kRuns.file("run");

TEST(Cli, DryRunOfTheReferenceConfigCountsParameters) {
  CliRun r =
      crest("train --config " + crest::test::source_path("configs/cosmoflow.yaml") + " --dry-run");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("8,907,556"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("planned memory"), std::string::npos);
  EXPECT_NE(r.out.find("conv5"), std::string::npos);
}

TEST(Cli, ReferenceDummyConfigLoadsUnchanged) {
  // CI clones the repository with shared/ beside it.
  const std::string ref = crest::test::source_path("../shared/reference/cosmo_dummy.yaml");
  if (!fs::exists(ref)) GTEST_SKIP() << ref << " not present";
  CliRun r = crest("train --config " + ref + " --dry-run data.batch_size=1");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("8,907,556"), std::string::npos);
}

// The reference backend is a single-threaded oracle: a run on it says so and reports the one
// thread it really uses, not the crest.threads it was given.
TEST(Cli, ReferenceBackendWarnsAndReportsTheThreadItUses) {
  CliRun r =
      crest("train --config " + kDemo + " crest.backend=reference crest.threads=2 --dry-run");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("backend reference | 1 thread |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("warning: crest.backend=reference"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("100x slower"), std::string::npos) << r.out;
  if (!crest::test::has_backend("onednn")) return;  // the default is then the reference backend
  r = crest("train --config " + kDemo + " crest.threads=2 --dry-run");
  ASSERT_EQ(r.code, 0) << r.out;
  // The header names what oneDNN and crest's own loops dispatch to on this CPU.
  EXPECT_NE(r.out.find("backend onednn (oneDNN "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(", crest loops "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(") | 2 threads"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("warning:"), std::string::npos) << r.out;
}

// With crest.threads 0 a job script's OMP_NUM_THREADS sets the count, as it does for OpenMP;
// crest.threads overrides it, and a value that is no count is refused before anything runs.
TEST(Cli, OmpNumThreadsSetsTheDefaultCountAndABadOneIsRefused) {
  if (!crest::test::has_backend("onednn")) GTEST_SKIP() << "backend 'onednn' is not built";
  const std::string train = std::string(CREST_BINARY) + " train --config " + kDemo + " --dry-run";
  CliRun r = crest::test::run_shell("env OMP_NUM_THREADS=3,1 " + train + " crest.threads=0 2>&1");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find(") | 3 threads (OMP_NUM_THREADS)"), std::string::npos) << r.out;
  r = crest::test::run_shell("env OMP_NUM_THREADS=3 " + train + " crest.threads=1 2>&1");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find(") | 1 thread |"), std::string::npos) << r.out;
  TempDir d;
  r = crest::test::run_shell("env OMP_NUM_THREADS=many " + std::string(CREST_BINARY) +
                             " train --config " + kDemo +
                             " crest.threads=0 output_dir=" + d.file("out") + " 2>&1");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("OMP_NUM_THREADS='many'"), std::string::npos) << r.out;
  EXPECT_EQ(d.entries(), 0u) << "a refused run must write nothing";
}

// One variable caps oneDNN and crest's own loops alike (widest_vectors.hpp); the lines say so.
TEST(Cli, MaxCpuIsaCapsOneDnnAndCrestLoopsAndABadValueIsRefused) {
  if (!crest::test::has_backend("onednn")) GTEST_SKIP() << "backend 'onednn' is not built";
  const std::string peak = " bench peak --size 64 --iters 1 --threads 1 2>&1";
  const CliRun capped = crest::test::run_shell(
      "env -u ONEDNN_MAX_CPU_ISA -u DNNL_MAX_CPU_ISA CREST_MAX_CPU_ISA=sse41 " +
      std::string(CREST_BINARY) + peak);
  ASSERT_EQ(capped.code, 0) << capped.out;
  EXPECT_NE(capped.out.find("\"isa\":\"oneDNN below AVX2, crest loops x86-64 baseline\""),
            std::string::npos)
      << capped.out;
  const CliRun bad =
      crest::test::run_shell("env CREST_MAX_CPU_ISA=avx3 " + std::string(CREST_BINARY) + peak);
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("CREST_MAX_CPU_ISA=avx3"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("AVX2"), std::string::npos) << "the levels it takes\n" << bad.out;
}

TEST(Cli, UnknownKeyExits2AndNamesKeyAndFile) {
  TempDir d;
  CliRun r = crest("train --config " + kDemo + " data.bogus_key=3 output_dir=" + d.file("out"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("data.bogus_key"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cosmoflow-demo.yaml"), std::string::npos) << r.out;
  EXPECT_EQ(d.entries(), 0u) << "a failed config must write nothing";
}

TEST(Cli, WrongTypeExits2AndNamesKey) {
  CliRun r = crest("train --config " + kDemo + " data.batch_size=abc");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("data.batch_size"), std::string::npos) << r.out;
}

TEST(Cli, ImpossibleSizeExits2AndNamesKey) {
  CliRun r = crest("train --config " + kDemo + " data.sample_shape=[48,48,48,4]");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("sample_shape"), std::string::npos) << r.out;
}

TEST(Cli, BadConfigFileExits2) {
  TempDir d;
  std::ofstream(d.file("bad.yaml")) << "data: [unclosed\n";
  CliRun r = crest("train --config " + d.file("bad.yaml"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("bad.yaml"), std::string::npos) << r.out;
  CliRun m = crest("train --config " + d.file("missing.yaml"));
  EXPECT_EQ(m.code, 2) << m.out;
  EXPECT_NE(m.out.find("missing.yaml"), std::string::npos) << m.out;
}

TEST(Cli, TrainsOnDummyDataWithFiniteLoss) {
  CliRun r = crest("train --config " + kSmall);
  ASSERT_EQ(r.code, 0) << r.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex("epoch 2/2 +loss ([0-9.]+)"))) << r.out;
  EXPECT_TRUE(std::isfinite(std::stod(m[1])));
  EXPECT_NE(r.out.find("done:"), std::string::npos);
}

TEST(Cli, LossGoesDownOnATinyFixedDataset) {
  // 8 fixed random samples, no dropout: the network fits them (slowly: random volumes look
  // alike after five poolings, so this checks the direction, not the speed).
  CliRun r = crest(
      "train --config " + kSmall +
      " data.n_epochs=20 model.dropout=0 lr_schedule.base_lr=0.01 lr_schedule.n_warmup_epochs=0 "
      "lr_schedule.decay_schedule={}");
  ASSERT_EQ(r.code, 0) << r.out;
  std::vector<double> losses;
  const std::regex re("epoch [0-9]+/20 +loss ([0-9.]+)");
  for (auto it = std::sregex_iterator(r.out.begin(), r.out.end(), re); it != std::sregex_iterator();
       ++it)
    losses.push_back(std::stod((*it)[1]));
  ASSERT_EQ(losses.size(), 20u) << r.out;
  EXPECT_LT(losses.back(), 0.85 * losses.front()) << r.out;
}

TEST(Cli, ProgressIsAPlainLineEveryLogIntervalWhenStdoutIsNotATerminal) {
  // Batch 1: 8 steps per epoch, a line due after every step at this interval.
  CliRun r = crest("train --config " + kSmall + " data.batch_size=1 train.log_every_s=0.000001");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("epoch 1/2: step 2/8 (25%)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("samples/s, loss "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find('\r'), std::string::npos) << "no carriage returns in a batch log";
  // The epoch line has the run's ETA while epochs remain.
  EXPECT_TRUE(std::regex_search(r.out, std::regex("epoch 1/2 .* ETA [0-9]+ s\n"))) << r.out;
  // The log file in the run directory has the same lines.
  std::ifstream log(kRuns.file("run/train.log"));
  std::stringstream text;
  text << log.rdbuf();
  EXPECT_NE(text.str().find("epoch 1/2: step 2/8"), std::string::npos) << text.str();
  // At the default interval (30 s) a short run prints epoch lines only.
  CliRun quiet = crest("train --config " + kSmall + " data.batch_size=1");
  ASSERT_EQ(quiet.code, 0) << quiet.out;
  EXPECT_EQ(quiet.out.find(": step "), std::string::npos) << quiet.out;
}

TEST(Cli, ProgressIsABarOnATerminal) {
  // script(1) gives crest a pseudo-terminal as stdout.
  const std::string cmd =
      std::string(CREST_BINARY) + " train --config " + kSmall + " data.batch_size=1";
  CliRun r = crest::test::run_shell("script -qec '" + cmd + "' /dev/null 2>&1");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("\r["), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("#"), std::string::npos) << r.out;
  // The bar stays out of the log file.
  std::ifstream log(kRuns.file("run/train.log"));
  std::stringstream text;
  text << log.rdbuf();
  EXPECT_EQ(text.str().find('\r'), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("epoch 2/2"), std::string::npos) << text.str();
}

TEST(Cli, SavedWeightsLoadBackAndBadFilesAreRefused) {
  TempDir d;
  const std::string w = d.file("w.safetensors");
  CliRun a = crest("train --config " + kSmall + " data.n_epochs=1 --save-weights " + w);
  ASSERT_EQ(a.code, 0) << a.out;
  ASSERT_TRUE(fs::exists(w));
  CliRun b = crest("train --config " + kSmall + " data.n_epochs=1 --init-weights " + w);
  EXPECT_EQ(b.code, 0) << b.out;
  // Weights of another model size are refused with the tensor named.
  CliRun c = crest("train --config " + kSmall + " model.conv_size=8 --init-weights " + w);
  EXPECT_EQ(c.code, 2) << c.out;
  EXPECT_NE(c.out.find("conv1.weight"), std::string::npos) << c.out;
  // A truncated file is refused with the file named, and never crashes.
  std::ofstream(d.file("trunc.safetensors"), std::ios::binary) << std::string("\x10\x00\x00", 3);
  CliRun t = crest("train --config " + kSmall + " --init-weights " + d.file("trunc.safetensors"));
  EXPECT_EQ(t.code, 2) << t.out;
  EXPECT_NE(t.out.find("trunc.safetensors"), std::string::npos) << t.out;
}

TEST(Cli, BenchTrainPrintsJson) {
  CliRun r =
      crest("bench train --size 32 --batch 2 --steps 1 --warmup 0 --conv-size 4 --threads 2");
  ASSERT_EQ(r.code, 0) << r.out;
  for (const char* key : {"\"samples_per_s\"", "\"step_s_min\"", "\"gflops\"", "\"peak_rss_mb\""})
    EXPECT_NE(r.out.find(key), std::string::npos) << key << " in " << r.out;
  // The steps' spread (crest plan's compute.step_jitter is it over the mean): none of one step;
  // of three, no more than their range.
  const auto one = crest::test::json_lines(r.out);
  ASSERT_EQ(one.size(), 1u) << r.out;
  EXPECT_EQ(one[0]["step_s_stdev"].get<double>(), 0);
  const CliRun three =
      crest("bench train --size 32 --batch 2 --steps 3 --warmup 0 --conv-size 4 --threads 2");
  const auto j = crest::test::json_lines(three.out);
  ASSERT_EQ(j.size(), 1u) << three.out;
  EXPECT_GT(j[0]["step_s_stdev"].get<double>(), 0);
  EXPECT_LE(j[0]["step_s_stdev"].get<double>(),
            2 * (j[0]["step_s_mean"].get<double>() - j[0]["step_s_min"].get<double>()) + 1e-12);
}

// ResNet-50 through the model benches (the figure the peers' scripts/bench_resnet50_*.py compare
// with): 3-channel images at --height x --width; a size the network cannot take names the key.
TEST(Cli, BenchesTakeResNet50Images) {
  for (const char* bench : {"train --steps 1", "infer --passes 1"}) {
    CliRun r = crest(std::string("bench ") + bench +
                     " --model resnet50 --height 32 --width 48 --batch 2 --warmup 0 --threads 1");
    ASSERT_EQ(r.code, 0) << r.out;
    const auto j = nlohmann::json::parse(r.out.substr(r.out.rfind("\n{") + 1));
    EXPECT_EQ(j["model"], "resnet50") << r.out;
    EXPECT_EQ(j["height"], 32) << r.out;
    EXPECT_EQ(j["width"], 48) << r.out;
    EXPECT_FALSE(j.contains("size")) << "CosmoFlow's key: " << r.out;
  }
  CliRun bad = crest("bench train --model resnet50 --height 16 --batch 1 --steps 1 --warmup 0");
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("input_shape"), std::string::npos) << bad.out;
}

// --graphs (crest.cuda_graphs) records steps on a device's stream; a CPU backend records none.
TEST(Cli, BenchTrainGraphsOnACpuBackendAreRefused) {
  const CliRun r = crest(
      "bench train --size 32 --batch 1 --steps 1 --warmup 0 --conv-size 2 --threads 1 --graphs");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("crest.cuda_graphs"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("records none (use crest.backend: cuda)"), std::string::npos) << r.out;
}

// The model's reference optimizer by default (CosmoFlow: SGD), any registered one by name.
TEST(Cli, BenchTrainStepsWithAnyRegisteredOptimizer) {
  const std::string bench =
      "bench train --size 32 --batch 1 --steps 1 --warmup 0 --conv-size 2 "
      "--threads 1";
  CliRun r = crest(bench);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("\"optimizer\":\"SGD\""), std::string::npos) << r.out;
  r = crest(bench + " --optimizer larc");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("\"optimizer\":\"LARC\""), std::string::npos) << r.out;
  r = crest(bench + " --optimizer rmsprop");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--optimizer: unknown optimizer 'rmsprop'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("LAMB"), std::string::npos) << "the registered ones are listed: " << r.out;
}

// One line per dtype. A dtype the CPU has no fast kernel for (oneDNN falls back to reference
// loops) says so with supported:false and no figure rather than a reference-loop "peak"; f32
// always has one on oneDNN. A build without oneDNN benches the reference backend, which measures
// no peak and says so for every dtype.
TEST(Cli, BenchPeakPrintsARateForEachDtypeOrSaysItIsUnsupported) {
  CliRun r = crest("bench peak --size 64 --iters 1 --threads 1");
  ASSERT_EQ(r.code, 0) << r.out;
  std::vector<std::string> dtypes;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] != '{') continue;
    const auto j = nlohmann::json::parse(line);
    ASSERT_EQ(j["bench"], "peak") << line;
    dtypes.push_back(j["dtype"].get<std::string>());
    if (j["supported"].get<bool>()) {
      EXPECT_GT(j["gflops"].get<double>(), 0.0) << line;
      EXPECT_EQ(j["implementation"].get<std::string>().find("ref"), std::string::npos) << line;
    } else {
      EXPECT_EQ(j["gflops"].get<double>(), 0.0) << line;
    }
    if (!crest::test::has_backend("onednn")) {
      EXPECT_FALSE(j["supported"].get<bool>()) << line;
      EXPECT_EQ(j["implementation"], "the reference backend measures no peak") << line;
    } else if (dtypes.back() == "f32") {
      EXPECT_TRUE(j["supported"].get<bool>()) << line;
    }
  }
  EXPECT_EQ(dtypes, (std::vector<std::string>{"f32", "bf16", "f16"})) << r.out;
}

// In bf16 the benches write their random batch into a 16-bit data input (half_inputs).
TEST(Cli, BenchesRunInBf16) {
  for (const char* bench : {"train --steps 1", "infer --passes 1"}) {
    CliRun r = crest(std::string("bench ") + bench +
                     " --size 32 --batch 2 --warmup 0 --conv-size 4 --threads 1 --backend "
                     "reference --precision bf16");
    ASSERT_EQ(r.code, 0) << bench << ": " << r.out;
    EXPECT_NE(r.out.find("\"precision\":\"bf16\""), std::string::npos) << r.out;
  }
}

TEST(Cli, UnknownCommandExits2) {
  EXPECT_EQ(crest("frobnicate").code, 2);
  EXPECT_EQ(crest("train").code, 2);
}

}  // namespace
