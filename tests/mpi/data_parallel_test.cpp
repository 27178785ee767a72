// Data-parallel training under mpirun (1, 2 and 4 ranks, oversubscribed on CI's 2 cores):
// equivalence with one process, refusal of mismatched models, and no silent hangs when a rank
// fails, dies or stops responding.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "crest/data/safetensors.hpp"
#include "support/cli_util.hpp"
#include "support/mirrored_values.hpp"
#include "support/scoped_env.hpp"
#include "support/weights_compare.hpp"

namespace crest {
namespace {

using test::json_lines;
using test::run_crest;
using test::run_crest_mpi;
using test::run_mpirun;
using test::run_shell;
using test::TempDir;
using test::worst_relative_difference;

const std::string kDemo = std::string(CREST_SOURCE_DIR) + "/configs/cosmoflow-demo.yaml";

// Three steps of global batch 4 on the demo's synthetic 32^3 data, sorted order, no dropout:
// with the reference's strided sharding, step k's global batch is the same 4 samples for any
// rank count.
std::string train_args(int local_batch, const std::string& weights) {
  return "train --config " + kDemo +
         " data.n_train=12 data.n_valid=4 data.n_epochs=1 data.batch_size=" +
         std::to_string(local_batch) +
         " model.dropout=0 data.shuffle=false crest.threads=1 --save-weights " + weights +
         " output_dir=" + weights + ".run";
}

// The run's summary line ("done: 2 epochs in 3.1 s; final loss ..."), with its elapsed time
// blanked: two runs of the same training agree on everything else in it.
std::string final_line(const std::string& out) {
  const auto at = out.find("done: ");
  if (at == std::string::npos) return "";
  return std::regex_replace(out.substr(at, out.find('\n', at) - at), std::regex(" in [0-9.]+ s"),
                            " in <elapsed> s");
}

TEST(DataParallel, RanksTimesLocalBatchReproduceOneProcessWithTheGlobalBatch) {
  // On oneDNN's direct kernels: the Winograd convolutions' weight gradients (conv2, conv3) round
  // differently for a batch of 4 than for two of 2 (about 1e-5 relative), and the near-cancelling
  // sums of conv1's bias gradient amplify that to 7e-5 on 2 ranks, 1.5e-4 on 4 (every weight stays
  // within 1e-6). This checks the data-parallel sums, not the kernels' rounding.
  const test::ScopedEnv direct("CREST_WINOGRAD", "0");
  TempDir dir;
  const auto one = run_crest(train_args(4, dir.file("one.safetensors")));
  ASSERT_EQ(one.code, 0) << one.out;
  // "final loss L, val_mae M": losses and MAE are reduced over all ranks, so they match too.
  const std::regex metrics("final loss [0-9.]+, val_mae [0-9.]+");
  std::smatch m1;
  const std::string l1 = final_line(one.out);
  ASSERT_TRUE(std::regex_search(l1, m1, metrics)) << one.out;
  for (int ranks : {1, 2, 4}) {
    SCOPED_TRACE(std::to_string(ranks) + " ranks");
    const std::string w = dir.file("ranks" + std::to_string(ranks) + ".safetensors");
    const auto r = run_crest_mpi(ranks, train_args(4 / ranks, w));
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_LE(worst_relative_difference(dir.file("one.safetensors"), w), 1e-5);
    std::smatch mn;
    const std::string ln = final_line(r.out);
    ASSERT_TRUE(std::regex_search(ln, mn, metrics)) << r.out;
    EXPECT_EQ(m1.str(), mn.str());
    if (ranks > 1) {
      EXPECT_NE(r.out.find(std::to_string(ranks) + " ranks (mpi"), std::string::npos) << r.out;
      // Rank 0 alone reports: one summary line, not one per rank.
      EXPECT_EQ(r.out.find("done: "), r.out.rfind("done: ")) << r.out;
    }
  }
}

TEST(DataParallel, Bf16AndFp16CompressedBucketsStayCloseButAreReallyCompressed) {
  TempDir dir;
  const auto one = run_crest(train_args(4, dir.file("one.safetensors")));
  ASSERT_EQ(one.code, 0) << one.out;
  const auto r =
      run_crest_mpi(2, train_args(2, dir.file("bf16.safetensors")) + " dist.compress=bf16");
  ASSERT_EQ(r.code, 0) << r.out;
  const double d =
      worst_relative_difference(dir.file("one.safetensors"), dir.file("bf16.safetensors"));
  // bf16 keeps 8 significant bits of each gradient (relative error <= 2^-9 per value): the
  // weights move by a little less than exactly, far more than float32 summation order explains.
  EXPECT_LT(d, 1e-2);
  EXPECT_GT(d, 1e-5) << "the gradients did not travel as bf16";
  // fp16 keeps 11 significant bits: closer than bf16, still visibly not float32.
  const auto h =
      run_crest_mpi(2, train_args(2, dir.file("fp16.safetensors")) + " dist.compress=fp16");
  ASSERT_EQ(h.code, 0) << h.out;
  const double d16 =
      worst_relative_difference(dir.file("one.safetensors"), dir.file("fp16.safetensors"));
  std::printf("worst relative difference: bf16 %.3g, fp16 %.3g\n", d, d16);
  EXPECT_LT(d16, d / 2) << "fp16 should be closer than bf16";
  EXPECT_GT(d16, 1e-7) << "the gradients did not travel as fp16";
}

TEST(DataParallel, RanksThatBuiltDifferentModelsAreRefusedWithWhatDiffers) {
  TempDir dir;
  const std::string crest = CREST_BINARY;
  const auto r =
      run_mpirun("-np 1 " + crest + " " + train_args(2, dir.file("a.safetensors")) + " : -np 1 " +
                     crest + " " + train_args(2, dir.file("b.safetensors")) + " model.fc1_size=64",
                 90);
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.code, 124) << "the job hung until the test's time limit:\n" << r.out;
  EXPECT_NE(r.out.find("rank 1 built a different model than rank 0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fc1.weight"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir.file("a.safetensors")));
}

// Without the abort, rank 0 would wait in a collective until the time limit (exit 124).
TEST(DataParallel, ARankThatFailsEndsTheWholeJob) {
  TempDir dir;
  const std::string crest = CREST_BINARY;
  const auto r = run_mpirun("-np 1 " + crest + " " + train_args(2, dir.file("a.safetensors")) +
                                " data.n_epochs=50 : -np 1 " + crest + " " +
                                train_args(2, dir.file("b.safetensors")) + " data.no_such_key=1",
                            180);
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.code, 124) << "the job hung until the test's time limit:\n" << r.out;
  EXPECT_NE(r.out.find("no_such_key"), std::string::npos) << r.out;
}

TEST(DataParallel, TooFewSamplesForEveryRankIsAnErrorNotAHang) {
  TempDir dir;
  const auto r = run_crest_mpi(
      4, train_args(1, dir.file("w.safetensors")) + " data.n_train=2 --threads 1", 60);
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.code, 124) << "the job hung until the test's time limit:\n" << r.out;
  EXPECT_NE(r.out.find("2 samples cannot give every one of 4 ranks a full batch of 1"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("1 thread per rank"), std::string::npos) << r.out;
}

// Starts a long 2-rank job, waits until it trains (its first epoch line: both ranks are past
// MPI start-up and in the step's collectives), then sends `signal` to one rank; returns the job's
// exit and output. The rank is a child of mpirun (Open MPI starts local ranks itself). A job that
// never gets to train within limit_s - 60 s (a generous bound: start-up on a slow, loaded machine
// takes seconds) fails the test saying so, instead of signalling a rank still in MPI_Init.
test::CliRun run_and_signal_one_rank(const std::string& signal, const std::string& extra,
                                     int limit_s) {
  TempDir dir;
  const std::string job =
      std::string("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ") + CREST_MPIEXEC +
      " --bind-to none -np 2 " + CREST_BINARY + " " + train_args(1, dir.file("w.safetensors")) +
      " data.n_train=64 data.n_epochs=200 " + extra;
  const std::string out = dir.file("out.txt");
  // The epoch's summary line ("epoch 1/200  loss ..."), not its progress bar ("epoch 1/200:
  // step ..."); under mpirun rank 0's stdout is a terminal, so the bar comes first on that line.
  // Waiting for it has its own deadline (limit_s - 60 s), leaving time for what follows.
  const std::string script =
      "(" + job + ") >> " + out + " 2>&1 & M=$!; " + "until grep -Eq \"epoch 1/[0-9]+ +loss\" " +
      out + " 2>/dev/null; do " + "if ! kill -0 $M 2>/dev/null || [ $SECONDS -ge " +
      std::to_string(limit_s - 60) +
      " ]; then echo \"the job did not get to train (after $SECONDS s)\"; kill -9 $M; cat " + out +
      "; exit 3; fi; sleep 0.2; done; " +
      "R=$(pgrep -P $M -x crest | head -1); echo \"signalled rank pid $R\" >> " + out + "; kill -" +
      signal + " $R; wait $M; code=$?; cat " + out + "; exit $code";
  const test::CliRun r =
      test::run_shell("timeout " + std::to_string(limit_s) + " bash -c '" + script + "' 2>&1");
  // Leave nothing behind if the job did hang: the stopped or orphaned rank must not outlive us.
  std::system(("pkill -9 -f '" + dir.file("w.safetensors") + "' 2>/dev/null").c_str());
  return r;
}

// A hang shows as exit 124 of the time limit (generous: the job must first get to train).
TEST(DataParallel, AKilledRankBringsTheJobDownWithAMessage) {
  const auto r = run_and_signal_one_rank("9", "dist.timeout_s=20", 300);
  EXPECT_NE(r.out.find("signalled rank pid "), std::string::npos) << r.out;
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.code, 124) << "the job hung until the test's time limit:\n" << r.out;
  EXPECT_EQ(r.out.find("done: "), std::string::npos) << r.out;
  // The launcher names the dead rank (Open MPI: "... exited on signal 9 (Killed)").
  EXPECT_NE(r.out.find("signal 9"), std::string::npos) << r.out;
}

// Without the watchdog the job would hang until the time limit (exit 124).
TEST(DataParallel, WatchdogAbortsWhenARankStopsRespondingNamingTheCollective) {
  const auto r = run_and_signal_one_rank("STOP", "dist.timeout_s=3", 300);
  EXPECT_NE(r.out.find("signalled rank pid "), std::string::npos) << r.out;
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.code, 124) << "the job hung until the test's time limit:\n" << r.out;
  EXPECT_NE(r.out.find("has not completed after"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("dist.timeout_s = 3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Aborting the job"), std::string::npos) << r.out;
  // The waiting rank asked the other one, which could not answer: it is the one stopped.
  EXPECT_TRUE(std::regex_search(r.out, std::regex("rank [01]: no answer within 2 s"))) << r.out;
}

TEST(DataParallel, BenchAllreduceChecksTheSumAndReportsBusBandwidth) {
  for (int ranks : {2, 4}) {
    const auto r = run_crest_mpi(ranks, "bench allreduce --sizes 1K,256K --iters 3");
    ASSERT_EQ(r.code, 0) << r.out;
    const auto lines = json_lines(r.out);
    ASSERT_EQ(lines.size(), 2u) << "rank 0 alone prints, one line per size:\n" << r.out;
    EXPECT_EQ(lines[0]["bytes"], 1024);
    EXPECT_EQ(lines[1]["bytes"], 256 * 1024);
    for (const auto& j : lines) {
      EXPECT_EQ(j["ranks"], ranks);
      EXPECT_EQ(j["communicator"], "mpi");
      EXPECT_EQ(j["memory"], "host");
      EXPECT_EQ(j["checked"], true);
      EXPECT_GT(j["time_us"].get<double>(), 0);
      // nccl-tests: algbw = bytes / time; busbw = algbw * 2 (n - 1) / n.
      const double algbw = j["bytes"].get<double>() / (j["time_us"].get<double>() * 1e-6) / 1e9;
      EXPECT_NEAR(j["algbw_gb_s"].get<double>(), algbw, 1e-9 + 1e-6 * algbw);
      EXPECT_NEAR(j["busbw_gb_s"].get<double>(), algbw * 2.0 * (ranks - 1) / ranks,
                  1e-9 + 1e-6 * algbw);
    }
  }
  const auto bad = run_crest("bench allreduce --sizes 1X");
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("'1X' is not a size"), std::string::npos) << bad.out;
}

// --backend: a host backend's memory is the host's (MPI, as without one); a device backend this
// machine cannot run (no GPU, or crest built without it) is refused, naming it. On a GPU the
// device check runs it through NCCL (scripts/device-check.sh, allreduce_nccl).
TEST(DataParallel, BenchAllreduceOnABackendsMemory) {
  const auto host = run_crest("bench allreduce --sizes 1K --iters 1 --backend reference");
  ASSERT_EQ(host.code, 0) << host.out;
  const auto lines = json_lines(host.out);
  ASSERT_EQ(lines.size(), 1U) << host.out;
  EXPECT_EQ(lines[0]["memory"], "host");
  EXPECT_EQ(lines[0]["checked"], true);
  if (test::cuda_usable()) GTEST_SKIP() << "a usable CUDA device: the device check runs it";
  const auto cuda = run_crest("bench allreduce --sizes 1K --iters 1 --backend cuda");
  EXPECT_EQ(cuda.code, 2) << cuda.out;
  EXPECT_NE(cuda.out.find("cuda"), std::string::npos) << cuda.out;
}

TEST(DataParallel, BenchTrainUnderMpirunReportsGlobalThroughputAndHiddenCommunication) {
  const auto r = run_crest_mpi(2,
                               "bench train --size 32 --batch 1 --steps 2 --warmup 1 --threads 1 "
                               "--bucket-mb 1 --baseline 10");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto lines = json_lines(r.out);
  ASSERT_EQ(lines.size(), 1u) << r.out;
  const auto& j = lines[0];
  EXPECT_EQ(j["ranks"], 2);
  EXPECT_EQ(j["global_batch"], 2);
  EXPECT_NEAR(j["samples_per_s"].get<double>(), 2.0 / j["step_s_min"].get<double>(), 1e-9);
  EXPECT_GE(j["gradient_buckets"].get<int>(), 2);
  EXPECT_GE(j["hidden_fraction"].get<double>(), 0.0);
  EXPECT_LE(j["hidden_fraction"].get<double>(), 1.0);
  EXPECT_GT(j["allreduce_s_per_step"].get<double>(), 0.0);
  // Load imbalance is told apart: the network's time is at most the slowest-waiting rank's.
  EXPECT_GT(j["communication_s_per_step"].get<double>(), 0.0);
  EXPECT_LE(j["communication_s_per_step"].get<double>(), j["allreduce_s_per_step"].get<double>());
  EXPECT_LE(j["exposed_communication_s_per_step"].get<double>(),
            j["exposed_allreduce_s_per_step"].get<double>());
  EXPECT_NEAR(j["imbalance_wait_s_per_step"].get<double>(),
              j["exposed_allreduce_s_per_step"].get<double>() -
                  j["exposed_communication_s_per_step"].get<double>(),
              1e-12);
  EXPECT_GE(j["hidden_fraction_excluding_imbalance"].get<double>(), 0.0);
  EXPECT_LE(j["hidden_fraction_excluding_imbalance"].get<double>(), 1.0);
  EXPECT_EQ(j["baseline_samples_per_s"], 10);
  EXPECT_NEAR(j["scaling_efficiency"].get<double>(), j["samples_per_s"].get<double>() / 10, 1e-9);
}

// --independent: each rank trains alone beside the others (crest plan calibrate's measure of ranks
// slowing each other down), so nothing is exchanged and rank 0's profile is printed.
TEST(DataParallel, BenchTrainIndependentRanksExchangeNothing) {
  const std::string bench =
      std::string(CREST_BINARY) +
      " bench train --size 32 --conv-size 4 --batch 1 --warmup 1 --threads 1 --independent "
      "--profile --steps ";
  // Rank 0 times 2 steps, rank 1 times 6: rank 0 keeps computing until rank 1 is done, and the
  // job ends (no message left waiting) with rank 0's figures.
  const auto r = test::run_mpirun("-np 1 " + bench + "2 : -np 1 " + bench + "6");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto lines = json_lines(r.out);
  ASSERT_GT(lines.size(), 1u) << r.out;
  const auto& j = lines[0];
  EXPECT_EQ(j["independent"], true);
  EXPECT_EQ(j["ranks"], 2);
  EXPECT_EQ(j["node_ranks"], 2);
  EXPECT_EQ(j["steps"], 2);
  EXPECT_FALSE(j.contains("allreduce_s_per_step")) << j.dump();
  EXPECT_FALSE(j.contains("gradient_buckets")) << j.dump();
  size_t layers = 0;
  double profiled_ms = 0;
  for (const auto& l : lines) {
    if (!l.contains("layer")) continue;
    ++layers;
    profiled_ms += l["forward_ms"].get<double>() + l["backward_ms"].get<double>();
  }
  EXPECT_EQ(layers + 1, lines.size());  // one rank's profile, not one per rank
  // The profile is of the 2 timed steps alone, not of the untimed ones rank 0 ran while rank 1
  // went on: its ops take part of a timed step.
  EXPECT_LE(profiled_ms, j["step_s_mean"].get<double>() * 1e3 * (1 + 1e-9));
  // Nothing exchanged: no flag that shapes an exchange goes with it.
  for (const char* flag : {"--gradient-lag 1", "--local-sgd 2", "--spatial 2,1,1",
                           "--compress bf16", "--baseline 1"}) {
    const auto refused = run_crest_mpi(2, bench.substr(bench.find("bench")) + "2 " + flag);
    EXPECT_EQ(refused.code, 2) << flag << "\n" << refused.out;
    EXPECT_NE(refused.out.find("--independent exchanges nothing"), std::string::npos)
        << refused.out;
  }
}

TEST(DataParallel, TimelineHasEveryRanksStepsAndBucketsAsAChromeTrace) {
  TempDir dir;
  const std::string trace = dir.file("timeline.json");
  const auto r = run_crest_mpi(
      2, train_args(2, dir.file("w.safetensors")) + " dist.bucket_mb=1 --timeline " + trace);
  ASSERT_EQ(r.code, 0) << r.out;
  std::ifstream in(trace);
  ASSERT_TRUE(in) << r.out;
  const nlohmann::json t = nlohmann::json::parse(in);
  std::set<std::pair<int, std::string>> seen;
  int allreduces = 0, buckets = 0;
  for (const auto& e : t.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    const std::string name = e.at("name");
    const int pid = e.at("pid");
    seen.insert({pid, name});
    EXPECT_GE(e.at("dur").get<double>(), 0.0);
    if (name.rfind("allreduce bucket ", 0) == 0) {
      ++allreduces;
      buckets = std::stoi(name.substr(name.find('/') + 1));
      seen.insert({pid, "allreduce"});
      EXPECT_EQ(e.at("tid"), 1);  // the communication row
      EXPECT_GT(e.at("args").at("bytes").get<int64_t>(), 0);
    }
  }
  for (int rank : {0, 1})
    for (const char* name :
         {"data wait", "forward", "backward", "gradient wait", "optimizer", "allreduce"})
      EXPECT_TRUE(seen.count({rank, name})) << "rank " << rank << " has no '" << name << "' span";
  // A timeline in a directory that does not exist is refused before training starts.
  const auto bad = run_crest(train_args(4, dir.file("w2.safetensors")) + " --timeline " +
                             dir.file("no/such/dir/t.json"));
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("is not a directory"), std::string::npos) << bad.out;
  EXPECT_EQ(bad.out.find("epoch 1/"), std::string::npos) << bad.out;
  // 3 steps x 2 ranks x the buckets of every step.
  EXPECT_GE(buckets, 2);
  EXPECT_EQ(allreduces, 3 * 2 * buckets);
}

// Resume under mpirun: 2 ranks stopped mid-epoch continue bit-identically (shuffle and dropout
// on), rank 0 alone reads the checkpoint; another rank count is refused mid-epoch.
TEST(DataParallel, ResumedMidEpochRunIsBitIdenticalAndNeedsTheSameRanks) {
  TempDir dir;
  const std::string small =
      "train --config " + kDemo +
      " data.n_train=16 data.n_valid=4 data.batch_size=2 data.sample_shape=[16,16,16,4]"
      " model.input_shape=[16,16,16,4] model.conv_size=4 model.n_conv_layers=2 crest.threads=1 ";
  const auto straight =
      run_crest_mpi(2, small + "data.n_epochs=2 output_dir=" + dir.file("straight") +
                           " --save-weights " + dir.file("straight.safetensors"));
  ASSERT_EQ(straight.code, 0) << straight.out;
  // 4 steps per epoch; checkpoints at steps 3 and 6; killed while writing the second.
  const auto killed = run_shell(
      "CREST_TEST_KILL_DURING_CHECKPOINT=2 OMPI_ALLOW_RUN_AS_ROOT=1 "
      "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
      "timeout 120 " +
      std::string(CREST_MPIEXEC) + " --oversubscribe --bind-to none -np 2 " + CREST_BINARY + " " +
      small + "data.n_epochs=2 'train.checkpoint_every=3 steps' output_dir=" + dir.file("run") +
      " 2>&1");
  EXPECT_NE(killed.code, 0) << killed.out;
  const auto refused = run_crest("train --resume " + dir.file("run"));
  EXPECT_EQ(refused.code, 2) << refused.out;
  EXPECT_NE(refused.out.find("same ranks"), std::string::npos) << refused.out;
  const auto resumed = run_crest_mpi(
      2, "train --resume " + dir.file("run") + " --save-weights " + dir.file("run.safetensors"));
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  EXPECT_NE(resumed.out.find("epoch 1, step 3"), std::string::npos) << resumed.out;
  SafetensorsFile a(dir.file("straight.safetensors")), b(dir.file("run.safetensors"));
  for (const auto& t : a.tensors())
    EXPECT_EQ(std::memcmp(t.data, b.at(t.name).data, t.bytes), 0) << t.name;
  // The same summary (epochs, final loss, val_mae, status), whatever each run's elapsed time.
  EXPECT_NE(final_line(straight.out), "") << straight.out;
  EXPECT_EQ(final_line(straight.out), final_line(resumed.out));
}

// A user error rank 0 finds for the whole job (here: an output_dir that holds an earlier run's
// checkpoints, without --overwrite) is printed once, not once per rank, and ends the job with
// exit 2 and nothing overwritten.
TEST(DataParallel, AnErrorEveryRankSharesIsPrintedOnce) {
  TempDir dir;
  const std::string args = train_args(2, dir.file("w.safetensors"));
  ASSERT_EQ(run_crest(args).code, 0);
  const auto r = run_crest_mpi(4, args + " --threads 1");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--overwrite"), std::string::npos) << r.out;
  size_t errors = 0;
  for (auto at = r.out.find("crest: error:"); at != std::string::npos;
       at = r.out.find("crest: error:", at + 1))
    ++errors;
  EXPECT_EQ(errors, 1u) << r.out;
  EXPECT_EQ(r.out.find("epoch 1/"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace crest

namespace crest {
namespace {

std::string file_bytes(const std::string& path) {
  std::string out;
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return out;
  char buf[65536];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, n);
  std::fclose(f);
  return out;
}

// Every file of `a` is in `b` with the same bytes.
void expect_same_tree(const std::string& a, const std::string& b) {
  size_t n = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(a)) {
    if (!e.is_regular_file()) continue;
    const auto rel = std::filesystem::relative(e.path(), a);
    const std::filesystem::path other = std::filesystem::path(b) / rel;
    ASSERT_TRUE(std::filesystem::exists(other)) << rel << " missing in " << b;
    EXPECT_TRUE(file_bytes(e.path().string()) == file_bytes(other.string())) << rel << " differs";
    ++n;
  }
  EXPECT_GT(n, 0u);
}

TEST(DistributedStaging, EveryFileLandsOnTheNodeReadOnceFromTheSource) {
  TempDir dir;
  const std::string src = dir.file("src");
  const auto gen = run_crest("datagen cosmoflow --out " + src + " --train 7 --valid 3 --size 32");
  ASSERT_EQ(gen.code, 0) << gen.out;
  { std::ofstream(src + "/notes.txt") << "top-level files go everywhere too\n"; }
  for (int ranks : {2, 4}) {
    SCOPED_TRACE(std::to_string(ranks) + " ranks");
    const std::string dst = dir.file("dst" + std::to_string(ranks));
    const auto r = run_crest_mpi(ranks, "stage --from " + src + " --to " + dst);
    ASSERT_EQ(r.code, 0) << r.out;
    expect_same_tree(src, dst);
    // 11 files: 11 reads across all ranks (each file once), every byte once.
    EXPECT_NE(r.out.find("staged 11 files"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(": 11 file reads and"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("across " + std::to_string(ranks) + " ranks (each file once)"),
              std::string::npos)
        << r.out;
    EXPECT_EQ(r.out.find("staged"), r.out.rfind("staged")) << "rank 0 alone reports:\n" << r.out;
    EXPECT_TRUE(std::filesystem::exists(dst + "/.crest-stage.json"));
    // A complete staging is reused, by any rank count.
    const auto again = run_crest_mpi(3, "stage --from " + src + " --to " + dst);
    ASSERT_EQ(again.code, 0) << again.out;
    EXPECT_NE(again.out.find("reusing it"), std::string::npos) << again.out;
  }
  // Training with data.stage_dir under mpirun stages, then reads the staged copy.
  const std::string stage = dir.file("node-local");
  const auto t =
      run_crest_mpi(2, "train --config " + kDemo + " data.name=cosmo data.data_dir=" + src +
                           " data.stage_dir=" + stage +
                           " data.n_train=6 data.n_valid=2 data.batch_size=1 data.n_epochs=1 "
                           "crest.threads=1 output_dir=" +
                           dir.file("run"));
  ASSERT_EQ(t.code, 0) << t.out;
  expect_same_tree(src, stage);
  EXPECT_NE(t.out.find("done: 1 epochs"), std::string::npos) << t.out;
}

// Two nodes of two ranks, simulated on this machine (CREST_TEST_RANKS_PER_NODE: ranks 0-1 are
// node 0, 2-3 node 1), each node with its own destination (MPMD: one --to per node). Every file
// lands on both nodes, each is read once, and a rank receives only its node share of the data
// from the other node (the files its local rank writes), not the whole dataset.
TEST(DistributedStaging, NodeAwareExchangeSendsEachRankOnlyItsNodeShare) {
  TempDir dir;
  const std::string src = dir.file("src");
  ASSERT_EQ(run_crest("datagen cosmoflow --out " + src + " --train 7 --valid 3 --size 32").code, 0);
  { std::ofstream(src + "/notes.txt") << "top-level files go everywhere too\n"; }
  int64_t total = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(src))
    if (e.is_regular_file()) total += static_cast<int64_t>(e.file_size());
  const std::string stage = std::string(CREST_BINARY) + " stage --from " + src + " --to ";
  // (-x per application context: Open MPI applies it to its own context only.)
  const auto r =
      run_mpirun("-x CREST_TEST_RANKS_PER_NODE=2 -np 2 " + stage + dir.file("node0") +
                     " : -x CREST_TEST_RANKS_PER_NODE=2 -np 2 " + stage + dir.file("node1"),
                 60);
  ASSERT_EQ(r.code, 0) << r.out;
  expect_same_tree(src, dir.file("node0"));
  expect_same_tree(src, dir.file("node1"));
  EXPECT_NE(r.out.find("2 nodes x 2 ranks"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(": 11 file reads and"), std::string::npos) << r.out;
  // Rank 0 (local rank 0 of node 0) writes files 0, 2, 4, ... and receives the half of those
  // that node 1 read: about a quarter of the data. The flat exchange gave it three quarters.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex("rank 0 received ([0-9.]+) (KiB|MiB)")))
      << r.out;
  const double received = std::stod(m[1]) * (m[2] == "MiB" ? 1048576.0 : 1024.0);
  EXPECT_LT(received, 0.45 * static_cast<double>(total)) << r.out;
  EXPECT_GT(received, 0.05 * static_cast<double>(total)) << r.out;
  // One real node: no rank receives anything; each writes what it read itself.
  const auto one = run_crest_mpi(2, "stage --from " + src + " --to " + dir.file("single"));
  ASSERT_EQ(one.code, 0) << one.out;
  expect_same_tree(src, dir.file("single"));
  EXPECT_NE(one.out.find("1 node x 2 ranks"), std::string::npos) << one.out;
  EXPECT_NE(one.out.find("rank 0 received 0.0 KiB"), std::string::npos) << one.out;
}

TEST(DistributedStaging, RefusesANonEmptyDestinationOnEveryRankWithoutWritingIt) {
  TempDir dir;
  const std::string src = dir.file("src"), dst = dir.file("dst");
  ASSERT_EQ(run_crest("datagen cosmoflow --out " + src + " --train 2 --valid 0 --size 32").code, 0);
  std::filesystem::create_directories(dst);
  { std::ofstream(dst + "/precious.txt") << "keep me\n"; }
  const auto r = run_crest_mpi(2, "stage --from " + src + " --to " + dst);
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.code, 124) << r.out;
  EXPECT_NE(r.out.find("refusing to write over it"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(dst + "/train"));
  std::ifstream kept(dst + "/precious.txt");
  std::string line;
  std::getline(kept, line);
  EXPECT_EQ(line, "keep me");
}

}  // namespace
}  // namespace crest
