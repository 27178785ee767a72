// Dynamic loss scaling under mpirun (2 ranks, the tiny CosmoFlow run): the overflow check rides
// the gradient allreduce, so an infinity on one rank skips the step on every rank; 1/S folded
// into the allreduce's 1/ranks leaves a float32 run's bits unchanged; fp16 compression carries
// the scaled gradients and turns values beyond its range into overflows that lower the scale
// instead of errors.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "crest/data/safetensors.hpp"
#include "support/cli_util.hpp"
#include "support/tiny_run.hpp"
#include "support/weights_compare.hpp"

namespace {

using crest::test::CliRun;
using crest::test::run_mpirun;
using crest::test::TempDir;
using crest::test::tiny_cosmoflow_args;

// `crest train` on 2 ranks with the tiny run's arguments, `more`, and the environment `env`
// ("-x NAME=value" options of mpirun).
CliRun two_ranks(const std::string& env, const std::string& more) {
  return run_mpirun("-np 2 " + env + " " + CREST_BINARY + " train " + tiny_cosmoflow_args() +
                        " crest.threads=1 train.loss_scaling=dynamic " + more,
                    300);
}

bool same_tensors(const std::string& a, const std::string& b) {
  const crest::SafetensorsFile fa(a), fb(b);
  for (const auto& t : fa.tensors())
    if (std::memcmp(t.data, fb.at(t.name).data, t.bytes) != 0) return false;
  return true;
}

// The infinity on rank 1 only must end like the infinity on both ranks: had rank 1 (or rank 0)
// applied its update, the ranks' weights would differ from then on and so would every later
// averaged gradient. And it must differ from a run without the fault.
TEST(LossScalingMpi, AnOverflowOnOneRankSkipsTheStepOnEveryRank) {
  TempDir d;
  const std::string epochs = "data.n_epochs=2 ";
  const CliRun one =
      two_ranks("-x CREST_TEST_GRAD_OVERFLOW_AT_STEP=3@1",
                epochs + "output_dir=" + d.file("one") + " --save-weights " + d.file("one.st"));
  ASSERT_EQ(one.code, 0) << one.out;
  EXPECT_NE(one.out.find("global step 3: gradient overflow at loss scale 65536; update skipped, "
                         "loss scale now 32768"),
            std::string::npos)
      << "rank 0 must learn of rank 1's overflow:\n"
      << one.out;
  const CliRun both =
      two_ranks("-x CREST_TEST_GRAD_OVERFLOW_AT_STEP=3",
                epochs + "output_dir=" + d.file("both") + " --save-weights " + d.file("both.st"));
  ASSERT_EQ(both.code, 0) << both.out;
  const CliRun none = two_ranks(
      "", epochs + "output_dir=" + d.file("none") + " --save-weights " + d.file("none.st"));
  ASSERT_EQ(none.code, 0) << none.out;
  crest::test::expect_same_tensors(d.file("one.st"), d.file("both.st"));
  EXPECT_FALSE(same_tensors(d.file("one.st"), d.file("none.st"))) << "the skip changed nothing";
}

// 1/S joins the allreduce's 1/ranks (after the window's 1/k): the bits of the unscaled run.
TEST(LossScalingMpi, FoldedIntoTheAveragingAPowerOfTwoScaleChangesNoBit) {
  TempDir d;
  const std::string args = "data.n_epochs=2 train.gradient_accumulation_frequency=2 ";
  const CliRun plain = two_ranks("", args + "train.loss_scaling=off output_dir=" + d.file("a") +
                                         " --save-weights " + d.file("a.st"));
  ASSERT_EQ(plain.code, 0) << plain.out;
  const CliRun scaled =
      two_ranks("", args + "train.loss_scale_growth_interval=1 output_dir=" + d.file("b") +
                        " --save-weights " + d.file("b.st"));
  ASSERT_EQ(scaled.code, 0) << scaled.out;
  EXPECT_NE(scaled.out.find("loss_scale 262144"), std::string::npos) << scaled.out;
  crest::test::expect_same_tensors(d.file("a.st"), d.file("b.st"));
}

// fp16 buckets carry S·g / ranks: at S = 2^24 the larger gradients exceed 65504, which without
// loss scaling is an error naming the bucket; with it each such step is an overflow that halves
// the scale until the gradients fit, and the run trains on.
TEST(LossScalingMpi, Fp16CompressionOverflowsLowerTheScaleInsteadOfFailing) {
  TempDir d;
  const CliRun r = two_ranks("",
                             "data.n_epochs=2 dist.compress=fp16 "
                             "train.loss_scale_initial=16777216 output_dir=" +
                                 d.file("run"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("global step 1: gradient overflow at loss scale 16777216"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("beyond fp16"), std::string::npos) << r.out;
}

}  // namespace
