// Stop signals (train.stop_signals, docs/checkpoints.md "Stopping before the end"): SIGTERM on any
// rank stops the job after the current step with a checkpoint, exit code 143, status.json
// "preempted"; the resumed run ends bit-identical to a straight one. A second signal exits at
// once. The signal is sent once the run has logged its first checkpoint (an event the test waits
// for), never after a guessed delay. Only the router thread takes the signals.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "crest/train/checkpoint.hpp"
#include "crest/train/stop_signals.hpp"
#include "support/background_run.hpp"
#include "support/cli_util.hpp"
#include "support/tiny_run.hpp"
#include "support/weights_compare.hpp"

namespace {

namespace fs = std::filesystem;
using crest::test::BackgroundRun;
using crest::test::CliRun;
using crest::test::read_text;
using crest::test::run_crest;
using crest::test::TempDir;
using crest::test::tiny_cosmoflow_args;

// The log line of the run's first checkpoint. Not the file: older checkpoints are deleted as new
// ones land, and at a few milliseconds per epoch a poll can miss every one of them.
const char* const kFirstCheckpoint = "checkpoint: /";

// A tiny training run that only a signal ends, into `run`.
std::string endless_tiny_run(const std::string& run) {
  return std::string(CREST_BINARY) + " train " + tiny_cosmoflow_args() +
         " data.n_epochs=1000 output_dir=" + run;
}

nlohmann::json status_of(const std::string& run) {
  return nlohmann::json::parse(read_text(run + "/status.json"));
}

// The run stopped by a signal, resumed to `epochs_done + 2` epochs, against a straight run of as
// many: the same weights and optimizer state, bit for bit.
// `extra`: the overrides the stopped run was started with.
void expect_resume_matches_straight(const TempDir& d, const std::string& run, int ranks,
                                    const std::string& extra = "") {
  const nlohmann::json st = status_of(run);
  const int epochs = st.at("epochs_done").get<int>() + 2;
  const std::string n = " data.n_epochs=" + std::to_string(epochs);
  auto crest_run = [&](const std::string& args) {
    return ranks == 1 ? run_crest(args) : crest::test::run_crest_mpi(ranks, args, 300);
  };
  const CliRun resumed =
      crest_run("train --resume " + run + n + " --save-weights " + d.file("resumed.safetensors"));
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  const CliRun straight =
      crest_run("train " + tiny_cosmoflow_args() + extra + n + " output_dir=" + d.file("straight") +
                " --save-weights " + d.file("straight.safetensors"));
  ASSERT_EQ(straight.code, 0) << straight.out;
  crest::test::expect_same_tensors(d.file("straight.safetensors"), d.file("resumed.safetensors"));
  crest::test::expect_same_tensors(crest::list_checkpoints(d.file("straight/checkpoints")).back(),
                                   crest::list_checkpoints(run + "/checkpoints").back());
}

TEST(StopSignal, SigtermStopsAfterTheStepWithACheckpointAndResumesBitIdentically) {
  TempDir d;
  const std::string run = d.file("run");
  BackgroundRun r(endless_tiny_run(run), d.file("out.txt"));
  ASSERT_TRUE(r.wait_for_output(kFirstCheckpoint)) << r.output();
  r.signal(SIGTERM);
  ASSERT_EQ(r.wait(), 143) << r.output();
  const std::string out = r.output();
  EXPECT_NE(out.find("stop signal received"), std::string::npos) << out;
  EXPECT_NE(out.find(": SIGTERM; checkpoint "), std::string::npos) << out;
  EXPECT_NE(out.find("resume with `crest train --resume " + run + "`"), std::string::npos) << out;
  const nlohmann::json st = status_of(run);
  EXPECT_EQ(st.at("state"), "preempted") << st.dump();
  EXPECT_EQ(st.at("resumable"), true);
  EXPECT_EQ(st.at("exit_code"), 143);
  EXPECT_EQ(st.at("checkpoint"), crest::list_checkpoints(run + "/checkpoints").back());
  // The checkpoint is the position the status names, and it is not an ended run.
  const crest::CheckpointInfo info = crest::read_checkpoint_info(st.at("checkpoint"));
  EXPECT_EQ(info.position.global_step, st.at("global_step").get<int64_t>());
  EXPECT_EQ(info.position.status, "");
  expect_resume_matches_straight(d, run, 1);
}

// Waits (generously: only a hang exceeds it) until `done` holds; whether it did.
template <typename Done>
bool eventually(Done done) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

// How a forked child ended: its exit code, or 128 + the signal that ended it.
int ended_as(pid_t child) {
  int status = 0;
  if (::waitpid(child, &status, 0) != child) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// In-process (a child process, so the test goes on): the first signal sent to the process is
// recorded by the router thread, a second one ends the process at once with 128 + its number.
TEST(StopSignal, FirstSignalIsRecordedSecondExitsAtOnce) {
  const pid_t child = ::fork();
  if (child == 0) {
    crest::StopSignals signals({"USR1", "TERM"});
    ::kill(::getpid(), SIGUSR1);
    if (!eventually([] { return crest::StopSignals::received() == SIGUSR1; })) ::_exit(1);
    ::kill(::getpid(), SIGTERM);
    eventually([] { return false; });
    ::_exit(2);  // not reached: the second signal exits
  }
  EXPECT_EQ(ended_as(child), 128 + SIGTERM);
}

// A signal of the stop set that no run asks for keeps its disposition: the default ends the
// process by that signal, SIG_IGN (nohup's SIGHUP) drops it. Signals are taken lowest number
// first, so the child seeing SIGUSR1 means SIGHUP came and went.
TEST(StopSignal, SignalsNobodyArmedKeepTheirDisposition) {
  const pid_t ends = ::fork();
  if (ends == 0) {
    { crest::StopSignals run({"USR2"}); }  // armed, then disarmed when the run ends
    ::kill(::getpid(), SIGUSR2);
    eventually([] { return false; });
    ::_exit(2);
  }
  EXPECT_EQ(ended_as(ends), 128 + SIGUSR2);
  const pid_t ignores = ::fork();
  if (ignores == 0) {
    ::signal(SIGHUP, SIG_IGN);
    crest::StopSignals run({"USR1"});
    ::kill(::getpid(), SIGHUP);
    ::kill(::getpid(), SIGUSR1);
    ::_exit(eventually([] { return crest::StopSignals::received() == SIGUSR1; }) ? 0 : 1);
  }
  EXPECT_EQ(ended_as(ignores), 0);
}

// The names of the threads of `pid` that do not block `signal` (from /proc: SigBlk is a hex mask,
// bit s-1 for signal s).
std::vector<std::string> threads_taking(pid_t pid, int signal) {
  std::vector<std::string> out;
  for (const auto& task : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
    const std::string status = read_text((task.path() / "status").string());
    const auto at = status.find("SigBlk:");
    if (at == std::string::npos) continue;
    const unsigned long long blocked = std::stoull(status.substr(at + 7), nullptr, 16);
    if ((blocked >> (signal - 1) & 1) == 0)
      out.push_back(read_text((task.path() / "comm").string()));
  }
  return out;
}

// No thread that may run a kernel takes a stop signal: oneDNN's AVX2 sgemm moves the stack
// pointer onto a heap workspace, and a signal frame pushed there corrupted the heap (1 run in 15
// on an AVX2 CPU stopped with "corrupted size vs. prev_size"). Every thread of a training run,
// OpenMP's and the loaders' included, blocks the stop set; only the router thread takes it.
TEST(StopSignal, OnlyTheRouterThreadTakesStopSignals) {
  TempDir d;
  const std::string run = d.file("run");
  BackgroundRun r(endless_tiny_run(run), d.file("out.txt"));
  ASSERT_TRUE(r.wait_for_output(kFirstCheckpoint)) << r.output();
  size_t threads = 0;
  for ([[maybe_unused]] const auto& t :
       fs::directory_iterator("/proc/" + std::to_string(r.pid()) + "/task"))
    ++threads;
  EXPECT_GE(threads, 3u) << "expected OpenMP and loader threads beside the main one";
  // The router waits in sigwait, which unblocks the set for that thread while it waits.
  for (const int s : {SIGTERM, SIGINT, SIGUSR1, SIGUSR2, SIGHUP, SIGQUIT, SIGXCPU})
    EXPECT_EQ(threads_taking(r.pid(), s), std::vector<std::string>{"crest-signals\n"})
        << crest::signal_name(s);
  r.signal(SIGTERM);
  EXPECT_EQ(r.wait(), 143) << r.output();
}

TEST(StopSignal, UnknownSignalNameIsRefusedNamingTheKey) {
  const CliRun r =
      run_crest("train " + tiny_cosmoflow_args() + " --dry-run 'train.stop_signals=[TERM, KILL]'");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("train.stop_signals"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("unknown signal \"KILL\""), std::string::npos) << r.out;
}

// The rank of an mpirun child, from its environment.
int rank_of(pid_t pid) {
  const std::string env = read_text("/proc/" + std::to_string(pid) + "/environ");
  const std::string key = std::string("OMPI_COMM_WORLD_RANK=");
  const auto at = env.find(key);
  return at == std::string::npos ? -1 : std::atoi(env.c_str() + at + key.size());
}

// The process ids of mpirun's children (its ranks on this machine).
std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> out;
  for (const auto& task : fs::directory_iterator("/proc/" + std::to_string(parent) + "/task")) {
    std::ifstream f(task.path() / "children");
    pid_t p = 0;
    while (f >> p) out.push_back(p);
  }
  return out;
}

// Two ranks; SIGTERM reaches rank 1 only (it writes nothing): the request crosses to rank 0 with
// the step's gradients, rank 0 writes the checkpoint, both exit 143.
TEST(StopSignal, SignalOnOneRankStopsEveryRank) {
  TempDir d;
  const std::string run = d.file("run");
  BackgroundRun r(
      "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
      "OMPI_MCA_rmaps_base_oversubscribe=1 timeout 300 " +
          std::string(CREST_MPIEXEC) + " --bind-to none -np 2 " + CREST_BINARY + " train " +
          tiny_cosmoflow_args() + " crest.threads=1 data.n_epochs=1000 output_dir=" + run,
      d.file("out.txt"));
  ASSERT_TRUE(r.wait_for_output(kFirstCheckpoint)) << r.output();
  // timeout -> mpirun -> ranks.
  pid_t rank1 = -1;
  for (pid_t mpirun : children_of(r.pid()))
    for (pid_t p : children_of(mpirun))
      if (rank_of(p) == 1) rank1 = p;
  ASSERT_GT(rank1, 0) << "rank 1's process not found";
  ::kill(rank1, SIGTERM);
  EXPECT_EQ(r.wait(), 143) << r.output();
  const nlohmann::json st = status_of(run);
  EXPECT_EQ(st.at("state"), "preempted") << st.dump();
  EXPECT_EQ(st.at("reason"), "SIGTERM");
  expect_resume_matches_straight(d, run, 2, " crest.threads=1");
}

}  // namespace
