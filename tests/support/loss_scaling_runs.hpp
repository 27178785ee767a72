// Multi-rank runs under dynamic loss scaling, as the data-parallel, local-SGD and pipeline tests
// check them: the loss scale a run ended with, and an overflow on one rank that every rank must
// skip alike.
#pragma once
#include <gtest/gtest.h>

#include <string>

#include "support/cli_util.hpp"
#include "support/weights_compare.hpp"

namespace crest::test {

// The last epoch line's loss scale in a run's output ("loss_scale 131072"; "" when none).
inline std::string last_loss_scale(const std::string& out) {
  const size_t at = out.rfind("loss_scale ");
  return at == std::string::npos ? "" : out.substr(at, out.find_first_of(" \n", at + 11) - at);
}

// `args` on `ranks` ranks with loss scaling off and with S = 2^16 growing every step (outputs
// named `name`-plain and `name`-scaled): S grew, and a float32 run ends with the unscaled run's
// bits (every S a power of two: scaling and unscaling are exact).
inline void expect_loss_scaling_leaves_the_bits(const TempDir& d, int ranks,
                                                const std::string& args, const std::string& name) {
  const auto plain =
      run_crest_mpi(ranks, args + " train.loss_scaling=off" + run_outputs(d, name + "-plain"));
  ASSERT_EQ(plain.code, 0) << plain.out;
  const auto scaled =
      run_crest_mpi(ranks, args + " train.loss_scaling=dynamic train.loss_scale_growth_interval=1" +
                               run_outputs(d, name + "-scaled"));
  ASSERT_EQ(scaled.code, 0) << scaled.out;
  EXPECT_NE(last_loss_scale(scaled.out).find("loss_scale "), std::string::npos) << scaled.out;
  EXPECT_NE(last_loss_scale(scaled.out), "loss_scale 65536") << "S never grew:\n" << scaled.out;
  expect_same_tensors(d.file(name + "-plain.safetensors"), d.file(name + "-scaled.safetensors"));
}

// `args` (a crest train command line) on 2 ranks three times: an infinity in rank 1's gradients
// at global step 3, in both ranks', and none. The first must log that every rank skipped step 3
// and halved S = 65536 (rank 0 prints the log), end with the second's weights (the ranks agreed
// on the overflow) and not with the third's (the skip mattered).
inline void expect_an_overflow_on_rank_1_is_skipped_everywhere(const TempDir& d,
                                                               const std::string& args) {
  const std::string run = std::string(CREST_BINARY) + " " + args;
  auto train = [&](const std::string& env, const std::string& name) {
    auto r = run_mpirun("-np 2 " + env + " " + run + run_outputs(d, name), 300);
    EXPECT_EQ(r.code, 0) << r.out;
    return r;
  };
  const auto one = train("-x CREST_TEST_GRAD_OVERFLOW_AT_STEP=3@1", "one");
  EXPECT_NE(one.out.find("global step 3: gradient overflow at loss scale 65536; update skipped, "
                         "loss scale now 32768"),
            std::string::npos)
      << "rank 0 must learn of rank 1's overflow:\n"
      << one.out;
  train("-x CREST_TEST_GRAD_OVERFLOW_AT_STEP=3", "both");
  train("", "none");
  expect_same_tensors(d.file("one.safetensors"), d.file("both.safetensors"));
  EXPECT_GT(worst_relative_difference(d.file("one.safetensors"), d.file("none.safetensors")), 0)
      << "the skip changed nothing";
}

}  // namespace crest::test
