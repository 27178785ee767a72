// crest.autotune end to end: a tuned run records its layout choices in its directory, and a
// resume uses them without measuring (so it computes what a straight run computes); a resumed
// untuned run stays untuned whatever crest.autotune says now.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "support/cli_util.hpp"
#include "support/test_util.hpp"
#include "support/tiny_run.hpp"
#include "support/weights_compare.hpp"

namespace fs = std::filesystem;

namespace {

using crest::test::CliRun;
using crest::test::expect_same_tensors;
using crest::test::read_text;
using crest::test::TempDir;

// crest with its layout cache at `cache` (never the user's own).
CliRun crest_with_cache(const std::string& cache, const std::string& args) {
  return crest::test::run_shell("CREST_LAYOUT_CACHE=" + cache + " " + CREST_BINARY + " " + args +
                                " 2>&1");
}

const std::string kTiny = crest::test::tiny_cosmoflow_args();

TEST(AutotuneResume, ResumeUsesTheRecordedLayoutsWithoutMeasuring) {
  CREST_SKIP_WITHOUT_BACKEND("onednn");  // the reference backend has no layouts to measure
  TempDir d;
  const std::string cache = d.file("cache.json");
  CliRun straight = crest_with_cache(
      cache, "train " + kTiny + " crest.autotune=true data.n_epochs=2 output_dir=" +
                 d.file("straight") + " --save-weights " + d.file("straight.safetensors"));
  ASSERT_EQ(straight.code, 0) << straight.out;
  ASSERT_TRUE(fs::exists(cache)) << straight.out;  // it measured
  const std::string record = d.file("straight/layouts.rank0.json");
  ASSERT_TRUE(fs::exists(record));
  EXPECT_NE(read_text(record).find("\"choices\""), std::string::npos) << read_text(record);

  CliRun first = crest_with_cache(
      cache,
      "train " + kTiny + " crest.autotune=true data.n_epochs=1 output_dir=" + d.file("split"));
  ASSERT_EQ(first.code, 0) << first.out;
  // The resume (crest.autotune still true: the config comes from the run directory) sees no
  // cache, as on another machine: the record decides, and nothing is measured.
  const std::string fresh_cache = d.file("fresh-cache.json");
  CliRun resumed = crest_with_cache(fresh_cache, "train --resume " + d.file("split") +
                                                     " data.n_epochs=2 --save-weights " +
                                                     d.file("split.safetensors"));
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  EXPECT_FALSE(fs::exists(fresh_cache)) << resumed.out;
  EXPECT_NE(read_text(d.file("split/train.log")).find("layouts: as recorded in"),
            std::string::npos);
  expect_same_tensors(d.file("straight.safetensors"), d.file("split.safetensors"));
}

TEST(AutotuneResume, AnUntunedRunStaysUntunedWhenResumed) {
  TempDir d;
  const std::string cache = d.file("cache.json");
  CliRun first =
      crest_with_cache(cache, "train " + kTiny + " data.n_epochs=1 output_dir=" + d.file("run"));
  ASSERT_EQ(first.code, 0) << first.out;
  EXPECT_FALSE(fs::exists(d.file("run/layouts.rank0.json")));
  CliRun resumed = crest_with_cache(
      cache, "train --resume " + d.file("run") + " crest.autotune=true data.n_epochs=2");
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  EXPECT_FALSE(fs::exists(cache)) << resumed.out;  // nothing measured
  EXPECT_FALSE(fs::exists(d.file("run/layouts.rank0.json")));
}

}  // namespace
