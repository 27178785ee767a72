// The loss scaler's rule (crest/optim/loss_scaler.hpp), as torch.amp.GradScaler.update() and
// Apex's DynamicLossScaler apply it: an overflow multiplies the scale by the back-off factor and
// restarts the count of clean steps; the growth_interval-th clean step in a row multiplies it by
// the growth factor; the scale stays within Apex's [1, 2^24].
#include "crest/optim/loss_scaler.hpp"

#include <gtest/gtest.h>

#include "crest/core/error.hpp"

namespace crest {
namespace {

LossScaler scaler(double initial, int64_t interval, double growth = 2, double backoff = 0.5) {
  return LossScaler(LossScalerOptions{.initial_scale = initial,
                                      .growth_interval = interval,
                                      .growth_factor = growth,
                                      .backoff_factor = backoff});
}

TEST(LossScaler, StartsWithTorchsDefaults) {
  const LossScaler s{LossScalerOptions{}};
  EXPECT_EQ(s.scale(), 65536);
  EXPECT_EQ(s.state().clean_steps, 0);
}

TEST(LossScaler, GrowsAfterTheIntervalAndBacksOffOnAnOverflow) {
  LossScaler s = scaler(1024, 3);
  s.update(false);
  s.update(false);
  EXPECT_EQ(s.scale(), 1024);
  EXPECT_EQ(s.state().clean_steps, 2);
  s.update(false);  // the third clean step in a row
  EXPECT_EQ(s.scale(), 2048);
  EXPECT_EQ(s.state().clean_steps, 0);
  s.update(false);
  s.update(false);
  s.update(true);  // two clean steps do not count towards the next growth after an overflow
  EXPECT_EQ(s.scale(), 1024);
  EXPECT_EQ(s.state().clean_steps, 0);
  s.update(false);
  s.update(false);
  EXPECT_EQ(s.scale(), 1024);
  s.update(false);
  EXPECT_EQ(s.scale(), 2048);
}

TEST(LossScaler, OtherFactors) {
  LossScaler s = scaler(100, 1, 1.5, 0.25);
  s.update(false);
  EXPECT_EQ(s.scale(), 150);
  s.update(true);
  EXPECT_EQ(s.scale(), 37.5);
}

// Apex's max_loss_scale (2^24) caps growth; below 1 no back-off: can_back_off() says the caller
// must treat an overflow at 1 as a non-finite step.
TEST(LossScaler, StaysBetweenOneAndTwoToThe24) {
  LossScaler big = scaler(LossScaler::kMaxScale / 2, 1);
  big.update(false);
  EXPECT_EQ(big.scale(), LossScaler::kMaxScale);
  big.update(false);
  EXPECT_EQ(big.scale(), LossScaler::kMaxScale);

  LossScaler small = scaler(3, 100);
  EXPECT_TRUE(small.can_back_off());
  small.update(true);
  EXPECT_EQ(small.scale(), 1.5);
  small.update(true);
  EXPECT_EQ(small.scale(), 1);  // not 0.75
  EXPECT_FALSE(small.can_back_off());
  EXPECT_THROW(small.update(true), Error);
}

TEST(LossScaler, RestoresAndResetsItsState) {
  LossScaler s = scaler(1024, 3);
  s.restore({256, 2});
  EXPECT_EQ(s.scale(), 256);
  s.update(false);
  EXPECT_EQ(s.scale(), 512) << "the restored count of clean steps counts";
  s.reset();
  EXPECT_EQ(s.scale(), 1024);
  EXPECT_EQ(s.state().clean_steps, 0);
}

TEST(LossScaler, RefusesOptionsOutsideTheirRanges) {
  EXPECT_THROW(scaler(0.5, 10), Error);
  EXPECT_THROW(scaler(LossScaler::kMaxScale * 2, 10), Error);
  EXPECT_THROW(scaler(1024, 0), Error);
  EXPECT_THROW(scaler(1024, 10, 1.0), Error);
  EXPECT_THROW(scaler(1024, 10, 2, 1.0), Error);
  EXPECT_THROW(scaler(1024, 10, 2, 0.0), Error);
}

TEST(LossScaler, TextOfAScale) {
  EXPECT_EQ(loss_scale_text(65536), "65536");
  EXPECT_EQ(loss_scale_text(16777216), "16777216");
  EXPECT_EQ(loss_scale_text(37.5), "37.5");
}

}  // namespace
}  // namespace crest
