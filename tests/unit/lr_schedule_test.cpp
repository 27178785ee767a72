// LrSchedule against hand-computed values of the reference CosmoFlow schedule (SPEC.md §1).
// Every expected number below was worked out by hand, not with the formula under test:
//   reference: base_lr 0.001, linear, base batch 64, 4 warmup epochs, decays {32: 0.25, 64: 0.125}.
#include "crest/optim/lr_schedule.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "crest/core/error.hpp"

namespace {

using crest::LrSchedule;

crest::LrSchedule reference() {
  LrSchedule s;
  s.base_lr = 0.001;
  s.scaling = LrSchedule::linear;
  s.base_batch_size = 64;
  s.n_warmup_epochs = 4;
  s.decay_schedule = {{32, 0.25}, {64, 0.125}};
  return s;
}

struct Point {
  int epoch;
  double lr;
};

void expect_points(const LrSchedule& s, int64_t global_batch, const std::vector<Point>& pts) {
  for (const auto& p : pts) {
    const double got = s.lr(p.epoch, global_batch);
    EXPECT_NEAR(got, p.lr, 1e-12 * p.lr)
        << "global batch " << global_batch << ", epoch " << p.epoch;
  }
}

TEST(LrSchedule, DefaultsAreTheReference) {
  LrSchedule d;
  LrSchedule r = reference();
  EXPECT_EQ(d.base_lr, r.base_lr);
  EXPECT_EQ(d.scaling, r.scaling);
  EXPECT_EQ(d.base_batch_size, r.base_batch_size);
  EXPECT_EQ(d.n_warmup_epochs, r.n_warmup_epochs);
  EXPECT_EQ(d.decay_schedule, r.decay_schedule);
}

// Global batch 64 = base batch: scale 1, peak 0.001, the warmup is flat.
TEST(LrSchedule, ReferenceAtBatch64) {
  expect_points(reference(), 64,
                {{0, 0.001},
                 {1, 0.001},
                 {3, 0.001},
                 {4, 0.001},
                 {5, 0.001},
                 {32, 0.001},
                 {33, 0.00025},
                 {64, 0.00025},
                 {65, 0.000125},
                 {127, 0.000125}});
}

// Global batch 256: scale 4, peak 0.004; warmup steps (0.004 - 0.001) / 4 = 0.00075 per epoch.
// Decay 32 applies from epoch 33 (0.004 * 0.25 = 0.001), decay 64 from 65 (0.004 * 0.125).
TEST(LrSchedule, ReferenceAtBatch256) {
  expect_points(reference(), 256,
                {{0, 0.001},
                 {1, 0.00175},
                 {2, 0.0025},
                 {3, 0.00325},
                 {4, 0.004},
                 {5, 0.004},
                 {32, 0.004},
                 {33, 0.001},
                 {64, 0.001},
                 {65, 0.0005},
                 {127, 0.0005}});
}

// Global batch 1024: scale 16, peak 0.016; warmup step (0.016 - 0.001) / 4 = 0.00375.
TEST(LrSchedule, ReferenceAtBatch1024) {
  expect_points(reference(), 1024,
                {{0, 0.001},
                 {1, 0.00475},
                 {2, 0.0085},
                 {3, 0.01225},
                 {4, 0.016},
                 {5, 0.016},
                 {32, 0.016},
                 {33, 0.004},
                 {64, 0.004},
                 {65, 0.002},
                 {127, 0.002}});
}

// Past the last decay epoch the last factor holds (no further decay, no reset).
TEST(LrSchedule, LastFactorHoldsBeyondSchedule) {
  expect_points(reference(), 1024, {{500, 0.002}, {100000, 0.002}});
}

// sqrt scaling: 256/64 = 4 -> scale 2, peak 0.002, warmup step 0.00025.
TEST(LrSchedule, SqrtScaling) {
  LrSchedule s = reference();
  s.scaling = LrSchedule::sqrt;
  expect_points(s, 256,
                {{0, 0.001},
                 {1, 0.00125},
                 {2, 0.0015},
                 {3, 0.00175},
                 {4, 0.002},
                 {32, 0.002},
                 {33, 0.0005},
                 {65, 0.00025},
                 {127, 0.00025}});
  // 1024/64 = 16 -> scale 4, peak 0.004 (the same numbers as linear at 256).
  expect_points(s, 1024,
                {{0, 0.001}, {1, 0.00175}, {3, 0.00325}, {4, 0.004}, {33, 0.001}, {65, 0.0005}});
  // 128/64 = 2 -> scale sqrt(2) = 1.4142135623730951, peak 0.0014142135623730951;
  // after decay 32: 0.25 * peak = 0.00035355339059327378.
  expect_points(s, 128, {{4, 0.0014142135623730951}, {33, 0.00035355339059327378}});
  EXPECT_NEAR(s.scale(128), 1.4142135623730951, 1e-15);
}

// none: peak = base_lr whatever the batch, so the warmup is flat.
TEST(LrSchedule, NoScaling) {
  LrSchedule s = reference();
  s.scaling = LrSchedule::none;
  for (int64_t gb : {1, 64, 1024, 65536}) {
    expect_points(s, gb,
                  {{0, 0.001},
                   {1, 0.001},
                   {3, 0.001},
                   {4, 0.001},
                   {32, 0.001},
                   {33, 0.00025},
                   {64, 0.00025},
                   {65, 0.000125},
                   {127, 0.000125}});
    EXPECT_EQ(s.scale(gb), 1.0);
  }
}

// n_warmup_epochs 0: the peak from epoch 0 on.
TEST(LrSchedule, NoWarmup) {
  LrSchedule s = reference();
  s.n_warmup_epochs = 0;
  expect_points(s, 256,
                {{0, 0.004},
                 {1, 0.004},
                 {3, 0.004},
                 {4, 0.004},
                 {32, 0.004},
                 {33, 0.001},
                 {64, 0.001},
                 {65, 0.0005},
                 {127, 0.0005}});
  expect_points(s, 1024, {{0, 0.016}, {33, 0.004}, {65, 0.002}});
}

// Batch below the base batch: scale 16/64 = 0.25, peak 0.00025; the warmup runs downward in
// steps of (0.00025 - 0.001) / 4 = -0.0001875.
TEST(LrSchedule, BatchBelowBaseWarmsDown) {
  expect_points(reference(), 16,
                {{0, 0.001},
                 {1, 0.0008125},
                 {2, 0.000625},
                 {3, 0.0004375},
                 {4, 0.00025},
                 {33, 0.0000625},
                 {65, 0.00003125}});
}

// A decay at epoch E applies only from E + 1 on (E < e, strictly), also for E = 0; an empty
// schedule never decays; the factor is that of the largest E below e, not a product.
TEST(LrSchedule, DecayBoundaries) {
  LrSchedule s = reference();
  s.n_warmup_epochs = 0;
  s.decay_schedule = {{0, 0.5}, {10, 0.1}};
  expect_points(s, 64, {{0, 0.001}, {1, 0.0005}, {10, 0.0005}, {11, 0.0001}, {50, 0.0001}});
  s.decay_schedule.clear();
  expect_points(s, 64, {{0, 0.001}, {1000, 0.001}});
  // A decay inside the warmup has no effect during warmup (the warmup formula wins there).
  s.n_warmup_epochs = 4;
  s.decay_schedule = {{1, 0.5}};
  expect_points(s, 256, {{2, 0.0025}, {3, 0.00325}, {4, 0.002}});
}

TEST(LrSchedule, ParseScaling) {
  EXPECT_EQ(LrSchedule::parse_scaling("linear"), LrSchedule::linear);
  EXPECT_EQ(LrSchedule::parse_scaling("sqrt"), LrSchedule::sqrt);
  EXPECT_EQ(LrSchedule::parse_scaling("none"), LrSchedule::none);
  EXPECT_STREQ(LrSchedule::scaling_name(LrSchedule::sqrt), "sqrt");
  try {
    (void)LrSchedule::parse_scaling("cubic");
    FAIL() << "expected crest::Error";
  } catch (const crest::Error& e) {
    EXPECT_EQ(e.kind(), crest::ErrorKind::input);
    EXPECT_NE(std::string(e.what()).find("cubic"), std::string::npos);
  }
}

TEST(LrSchedule, RejectsInvalidSettings) {
  const LrSchedule ok = reference();
  EXPECT_NO_THROW(ok.validate());
  EXPECT_THROW((void)ok.lr(0, 0), crest::Error);
  EXPECT_THROW((void)ok.lr(0, -4), crest::Error);
  EXPECT_THROW((void)ok.lr(-1, 64), crest::Error);
  LrSchedule s = ok;
  s.base_batch_size = 0;
  EXPECT_THROW((void)s.lr(0, 64), crest::Error);
  s = ok;
  s.base_lr = 0.0;
  EXPECT_THROW(s.validate(), crest::Error);
  s = ok;
  s.base_lr = std::nan("");
  EXPECT_THROW(s.validate(), crest::Error);
  s = ok;
  s.n_warmup_epochs = -1;
  EXPECT_THROW(s.validate(), crest::Error);
  s = ok;
  s.decay_schedule = {{32, 0.0}};
  EXPECT_THROW(s.validate(), crest::Error);
  s = ok;
  s.decay_schedule = {{-3, 0.5}};
  EXPECT_THROW(s.validate(), crest::Error);
}

}  // namespace
