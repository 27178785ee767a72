// Stop signals (train.stop_signals, docs/checkpoints.md "Stopping before the end"): SIGTERM on any
// rank stops the job after the current step with a checkpoint, exit code 143, status.json
// "preempted"; the resumed run ends bit-identical to a straight one. A second signal exits at
// once. The signal is sent once the run has written its first checkpoint (a file the test waits
// for), never after a guessed delay.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "crest/train/checkpoint.hpp"
#include "support/background_run.hpp"
#include "support/cli_util.hpp"
#include "support/tiny_run.hpp"
#include "support/weights_compare.hpp"
#include "train/stop_signals.hpp"

namespace {

namespace fs = std::filesystem;
using crest::test::BackgroundRun;
using crest::test::CliRun;
using crest::test::read_text;
using crest::test::run_crest;
using crest::test::TempDir;
using crest::test::tiny_cosmoflow_args;

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
  BackgroundRun r(std::string(CREST_BINARY) + " train " + tiny_cosmoflow_args() +
                      " data.n_epochs=1000 output_dir=" + run,
                  d.file("out.txt"));
  ASSERT_TRUE(r.wait_for_file(run + "/checkpoints/ckpt-000000000004.safetensors")) << r.output();
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

// In-process: the first signal is recorded, a second one ends the process at once with 128 + its
// number (a child process, so the test goes on).
TEST(StopSignal, FirstSignalIsRecordedSecondExitsAtOnce) {
  const pid_t child = ::fork();
  if (child == 0) {
    crest::StopSignals signals({"USR1", "TERM"});
    std::raise(SIGUSR1);
    if (crest::StopSignals::received() != SIGUSR1) ::_exit(1);
    std::raise(SIGTERM);
    ::_exit(2);  // not reached: the second signal exits
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM);
  // Handlers are restored when the run ends.
  {
    crest::StopSignals signals({"USR2"});
    EXPECT_EQ(crest::StopSignals::received(), 0);
  }
  struct sigaction now {};
  ::sigaction(SIGUSR2, nullptr, &now);
  EXPECT_EQ(now.sa_handler, SIG_DFL);
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
  ASSERT_TRUE(r.wait_for_file(run + "/checkpoints/ckpt-000000000002.safetensors")) << r.output();
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
