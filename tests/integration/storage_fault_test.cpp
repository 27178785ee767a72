// Storage faults (docs/checkpoints.md, docs/security.md "Faults"): --resume falls back to the
// newest valid checkpoint by itself and says which file it skipped and why; a failed checkpoint
// write stops the run or, with train.checkpoint_failures: tolerate, is logged while training goes
// on; and a real full file system (a small tmpfs in the test's own mount namespace, where the
// machine allows one) during checkpoints and during the MLPerf log, TensorBoard and report writes
// fails cleanly, naming the file, with the previous checkpoint intact.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "crest/train/checkpoint.hpp"
#include "support/cli_util.hpp"
#include "support/tiny_run.hpp"
#include "support/weights_compare.hpp"

namespace {

namespace fs = std::filesystem;
using crest::test::CliRun;
using crest::test::run_crest;
using crest::test::run_shell;
using crest::test::TempDir;
using crest::test::tiny_cosmoflow_args;

std::vector<std::string> checkpoints(const std::string& run) {
  return crest::list_checkpoints(run + "/checkpoints");
}

bool temporary_files_left(const std::string& dir) {
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().filename().string().find(".tmp-") != std::string::npos) return true;
  return false;
}

TEST(StorageFault, ResumeFallsBackToTheNewestValidCheckpointAndSaysWhy) {
  TempDir d;
  const std::string run = d.file("run");
  ASSERT_EQ(run_crest("train " + tiny_cosmoflow_args() + " data.n_epochs=2 output_dir=" + run).code,
            0);
  const auto both = checkpoints(run);
  ASSERT_EQ(both.size(), 2u);
  {  // One flipped byte in the newest one's tensor data.
    std::fstream f(both[1], std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(both[1]) - 100));
    f.put('\x7f');
  }
  const CliRun resumed = run_crest("train --resume " + run + " data.n_epochs=3 --save-weights " +
                                   d.file("resumed.safetensors"));
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  EXPECT_NE(resumed.out.find("resume: skipped " + both[1] + ": checkpoint is corrupt"),
            std::string::npos)
      << resumed.out;
  EXPECT_NE(resumed.out.find("renamed to " + both[1] + ".damaged"), std::string::npos)
      << resumed.out;
  EXPECT_NE(resumed.out.find("from " + both[0]), std::string::npos) << resumed.out;
  EXPECT_TRUE(fs::exists(both[1] + ".damaged"));  // kept for a post-mortem
  crest::test::expect_straight_run_gives(d, 3, d.file("resumed.safetensors"));
}

// A per-file size limit below one checkpoint (ulimit -f, SIGXFSZ ignored): every write fails as
// on a full disk. Tolerated, training goes on; the end says the final state was not saved.
TEST(StorageFault, ToleratedWriteFailuresAreLoggedWhileTrainingGoesOn) {
  TempDir d;
  const std::string run = d.file("run");
  ASSERT_EQ(run_crest("train " + tiny_cosmoflow_args() + " data.n_epochs=1 output_dir=" + run).code,
            0);
  const std::string good = checkpoints(run).back();
  const std::string limit = "trap '' XFSZ; ulimit -f " +
                            std::to_string(fs::file_size(good) / 1024 / 2) + "; " + CREST_BINARY;
  const CliRun tolerated = run_shell(limit + " train --resume " + run +
                                     " data.n_epochs=3 train.checkpoint_failures=tolerate 2>&1");
  EXPECT_EQ(tolerated.code, 1) << tolerated.out;
  EXPECT_NE(tolerated.out.find("checkpoint failed: " + run +
                               "/checkpoints/ckpt-000000000008.safetensors: write failed"),
            std::string::npos)
      << tolerated.out;
  EXPECT_NE(tolerated.out.find("training goes on"), std::string::npos) << tolerated.out;
  EXPECT_NE(tolerated.out.find("a resume would use " + good), std::string::npos) << tolerated.out;
  EXPECT_NE(tolerated.out.find("epoch 3/3"), std::string::npos) << tolerated.out;
  EXPECT_NE(tolerated.out.find("the final checkpoint could not be written"), std::string::npos)
      << tolerated.out;
  EXPECT_EQ(checkpoints(run), std::vector<std::string>{good});
  EXPECT_FALSE(temporary_files_left(run));
  // stop (the default) names the same fallback in its error.
  const CliRun stopped = run_shell(limit + " train --resume " + run +
                                   " data.n_epochs=3 train.checkpoint_failures=stop 2>&1");
  EXPECT_EQ(stopped.code, 2) << stopped.out;
  EXPECT_NE(stopped.out.find("a resume would use " + good), std::string::npos) << stopped.out;
}

// A shell script run as root of a new user and mount namespace, with a tmpfs of `size` at
// `mount`: a real full file system, gone when the script ends (it copies out what the test
// reads). Skipped where the machine allows no such namespace.
CliRun in_small_filesystem(const std::string& mount, const std::string& size,
                           const std::string& script) {
  return run_shell("unshare -rm sh -c 'mount -t tmpfs -o size=" + size + " tmpfs " + mount +
                   " && " + script + "' 2>&1");
}

bool namespaces_allowed() { return run_shell("unshare -rm true 2>&1").code == 0; }

TEST(StorageFault, RealFullFilesystemDuringACheckpoint) {
  if (!namespaces_allowed())
    GTEST_SKIP() << "unshare -rm is not permitted here: no private tmpfs for a real full disk";
  TempDir d;
  const std::string fs_dir = d.file("fs"), out = d.file("out");
  fs::create_directories(fs_dir);
  // 1000 KiB: the first checkpoint (~600 KiB) fits, a second one next to it does not.
  const CliRun r = in_small_filesystem(
      fs_dir, "1000k",
      std::string(CREST_BINARY) + " train " + tiny_cosmoflow_args() +
          " data.n_epochs=3 output_dir=" + fs_dir +
          "/run train.checkpoint_failures=tolerate train.report=true; echo exit=$?; cp -a " +
          fs_dir + "/run " + out);
  EXPECT_NE(r.out.find("exit=1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ckpt-000000000008.safetensors: write failed: No space left on device"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("a resume would use " + fs_dir + "/run/checkpoints/ckpt-000000000004"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("epoch 3/3"), std::string::npos) << r.out;
  const auto left = checkpoints(out);
  ASSERT_EQ(left.size(), 1u) << r.out;
  EXPECT_NO_THROW((void)crest::read_checkpoint_info(left[0]));
  EXPECT_FALSE(temporary_files_left(out));
}

// The disk fills up while the run goes on (the test fills it once the first checkpoint is there):
// the next write, whichever it is (MLPerf log, TensorBoard event, train.log, report, checkpoint),
// ends the run with an error naming the file, and the checkpoint stays valid.
TEST(StorageFault, RealFullFilesystemDuringTheLogs) {
  if (!namespaces_allowed())
    GTEST_SKIP() << "unshare -rm is not permitted here: no private tmpfs for a real full disk";
  TempDir d;
  const std::string fs_dir = d.file("fs"), out = d.file("out");
  fs::create_directories(fs_dir);
  const std::string first = fs_dir + "/run/checkpoints/ckpt-000000000004.safetensors";
  const CliRun r = in_small_filesystem(
      fs_dir, "2000k",
      "(" + std::string(CREST_BINARY) + " train " + tiny_cosmoflow_args() +
          " data.n_epochs=1000 output_dir=" + fs_dir +
          "/run train.report=true train.checkpoint_failures=tolerate; echo exit=$? ) & "
          "while [ ! -e " +
          first + " ]; do sleep 0.01; done; cat /dev/zero > " + fs_dir +
          "/filler 2>/dev/null; wait; cp -a " + fs_dir + "/run " + out);
  EXPECT_EQ(r.out.find("exit=0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("crest: error: " + fs_dir + "/run/"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("No space left on device"), std::string::npos) << r.out;
  const auto left = checkpoints(out);
  ASSERT_FALSE(left.empty()) << r.out;
  EXPECT_NO_THROW((void)crest::read_checkpoint_info(left.back()));
  EXPECT_FALSE(temporary_files_left(out));
}

}  // namespace
