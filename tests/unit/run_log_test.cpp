// RunLog (crest/train/run_directory.hpp): rank 0's log reaches its stream a whole line at a time
// (under mpirun the ranks share one pipe) and the run's train.log receives the same text.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "crest/core/error.hpp"
#include "crest/train/run_directory.hpp"
#include "support/cli_util.hpp"
#include "support/recorded_writes.hpp"
#include "support/test_util.hpp"

namespace crest {
namespace {

TEST(RunLog, EachLineReachesTheStreamInOneWriteAndTheFileHoldsTheSame) {
  test::TempDir dir;
  const std::string path = dir.file("train.log");
  test::RecordedWrites writes;
  std::ostream to(&writes);
  {
    RunLog log(to, path, /*append=*/false);
    log.stream() << "epoch " << 1 << ": loss " << 0.25 << "\n"
                 << "step 3/8\r";
    EXPECT_EQ(writes.seen, (std::vector<std::string>{"epoch 1: loss 0.25\n", "step 3/8\r"}));
    log.stream() << "unfinished";
    EXPECT_EQ(writes.seen.size(), 2u) << "a line without its end was written";
  }
  EXPECT_EQ(writes.seen.back(), "unfinished") << "closing the log lost its last text";
  EXPECT_EQ(test::slurp(path), "epoch 1: loss 0.25\nstep 3/8\runfinished");
}

TEST(RunLog, AResumedRunAppendsToTheFile) {
  test::TempDir dir;
  const std::string path = dir.file("train.log");
  std::ostringstream to;
  RunLog(to, path, false).stream() << "first run\n";
  RunLog(to, path, true).stream() << "resumed\n";
  EXPECT_EQ(test::slurp(path), "first run\nresumed\n");
  EXPECT_EQ(to.str(), "first run\nresumed\n");
  RunLog(to, path, false).stream() << "fresh\n";
  EXPECT_EQ(test::slurp(path), "fresh\n");
}

TEST(RunLog, AnUnwritableFileIsNamed) {
  test::TempDir dir;
  const std::string path = dir.file("no/such/dir/train.log");
  std::ostringstream to;
  try {
    RunLog log(to, path, false);
    FAIL() << "an unwritable log was opened";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace crest
