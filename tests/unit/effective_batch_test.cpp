// lr_schedule.scaling scales by the batch one optimizer step averages over: the per-rank batch,
// the ranks and the accumulated micro-batches (issue 13: a 2-core machine reproduces a large
// global batch through accumulation, and its learning rate must be the large batch's).
#include <gtest/gtest.h>

#include "crest/train/config.hpp"
#include "crest/train/trainer.hpp"
#include "support/test_util.hpp"

namespace crest {
namespace {

TEST(EffectiveBatch, IsTheBatchTimesRanksTimesAccumulationAndScalesTheRate) {
  const Config c =
      load_config(test::source_path("configs/cosmoflow-demo.yaml"),
                  {"data.batch_size=3", "train.gradient_accumulation_frequency=4",
                   "lr_schedule={base_lr: 0.001, scaling: linear, base_batch_size: 2}"});
  EXPECT_EQ(effective_batch(c, 1), 12);
  EXPECT_EQ(effective_batch(c, 2), 24);
  const auto policy = lr_policy_of(c.lr_schedule, effective_batch(c, 2));
  EXPECT_DOUBLE_EQ(policy->lr(0, 0), 0.001 * 24 / 2);
}

}  // namespace
}  // namespace crest
