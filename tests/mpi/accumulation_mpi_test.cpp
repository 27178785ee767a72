// Gradient accumulation under mpirun: 2 ranks x batch 1 x 2 micro-batches take the steps of one
// process with batch 4, and a 2-rank run resumed from a checkpoint taken while an accumulation
// window was open (every rank's partial sum averaged into the checkpoint first) is bit-identical
// to a straight run.
#include <gtest/gtest.h>

#include <cmath>

#include "crest/data/safetensors.hpp"
#include "support/cli_util.hpp"
#include "support/same_training.hpp"
#include "support/tiny_run.hpp"
#include "support/weights_compare.hpp"

namespace crest {
namespace {

using test::run_crest;
using test::run_crest_mpi;
using test::TempDir;
using test::worst_relative_difference;

// 6 steps per epoch on 2 ranks of batch 1 (support/tiny_run.hpp).
const std::string kSmall = test::tiny_sorted_training();

// Strided sharding: rank r's micro-batch j is sample 2 j + r, so each window of two micro-batches
// on two ranks covers the same 4 samples as one batch of 4. Under SGD and under LAMB, whose
// global gradient norm every rank takes from the same averaged gradients.
TEST(AccumulationMpi, TwoRanksTimesTwoMicroBatchesEqualOneBatchOfFour) {
  for (const std::string optimizer : {"", "'optimizer={name: LAMB, weight_decay: 0.01}' "}) {
    SCOPED_TRACE(optimizer.empty() ? "SGD" : "LAMB");
    TempDir d;
    const auto one = run_crest(kSmall + optimizer +
                               "data.n_epochs=1 data.batch_size=4 output_dir=" + d.file("one") +
                               " --save-weights " + d.file("one.safetensors"));
    ASSERT_EQ(one.code, 0) << one.out;
    const auto two =
        run_crest_mpi(2, kSmall + optimizer +
                             "data.n_epochs=1 data.batch_size=1 "
                             "train.gradient_accumulation_frequency=2 output_dir=" +
                             d.file("two") + " --save-weights " + d.file("two.safetensors"));
    ASSERT_EQ(two.code, 0) << two.out;
    EXPECT_LE(worst_relative_difference(d.file("one.safetensors"), d.file("two.safetensors")),
              1e-5);
  }
}

// 6 micro-batches per rank and epoch, 4 per update: epoch 1 ends with two summed and waiting.
TEST(AccumulationMpi, ResumeWithAnOpenWindowOnTwoRanksIsBitIdentical) {
  test::expect_resume_after_an_epoch_is_exact(
      2, kSmall + "data.batch_size=1 train.gradient_accumulation_frequency=4");
}

}  // namespace
}  // namespace crest
