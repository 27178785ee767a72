// Pipeline plans (crest/dist/pipeline_schedule.hpp) checked without kernels: GPipe and 1F1B for 1,
// 2 and 4 stages and 1, 4 and 8 micro-batches run to the end in the validator, with the bubble
// (K - 1) / (M + K - 1) at equal forward costs and the activations each keeps (GPipe all M,
// 1F1B at most K - s on stage s); and the validator catches a plan broken in each way that would
// hang or corrupt a real run.
#include "crest/dist/pipeline_schedule.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "crest/core/error.hpp"

namespace crest {
namespace {

using Kind = PipelineAction::Kind;

TEST(PipelineSchedule, GPipeAndOneForwardOneBackwardRunWithTheExpectedBubbleAndMemory) {
  for (const auto kind :
       {PipelineScheduleKind::gpipe, PipelineScheduleKind::one_forward_one_backward})
    for (const int k : {1, 2, 4})
      for (const int m : {1, 4, 8}) {
        const bool gpipe = kind == PipelineScheduleKind::gpipe;
        SCOPED_TRACE(std::string(gpipe ? "GPipe" : "1F1B") + ", " + std::to_string(k) +
                     " stages, " + std::to_string(m) + " micro-batches");
        const PipelinePlan plan = make_pipeline_plan(kind, k, m);
        ASSERT_EQ(plan.size(), static_cast<size_t>(k));
        // Forward and backward equally long: the textbook bubble, exactly.
        const PipelineCheck equal = check_pipeline_plan(plan, m, 1, 1);
        ASSERT_EQ(equal.problem, "");
        EXPECT_NEAR(equal.bubble_fraction, static_cast<double>(k - 1) / (m + k - 1), 1e-12);
        for (int s = 0; s < k; ++s)
          EXPECT_EQ(equal.peak_activations[static_cast<size_t>(s)], gpipe ? m : std::min(k - s, m))
              << "stage " << s;
        // A backward twice the forward (the usual ratio) keeps the pipeline valid.
        EXPECT_EQ(check_pipeline_plan(plan, m).problem, "");
      }
}

TEST(PipelineSchedule, OneForwardOneBackwardInterleavesAfterItsWarmUp) {
  const PipelinePlan plan =
      make_pipeline_plan(PipelineScheduleKind::one_forward_one_backward, 4, 8);
  std::string order;  // stage 1's compute: F0 F1 F2 B0 F3 B1 ...
  for (const PipelineAction& a : plan[1])
    if (a.kind == Kind::forward || a.kind == Kind::backward)
      order += (a.kind == Kind::forward ? "F" : "B") + std::to_string(a.micro_batch) + " ";
  EXPECT_EQ(order, "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7 ");
}

// Each way of breaking a valid plan, and what the validator says.
TEST(PipelineSchedule, TheValidatorNamesWhatABrokenPlanWouldDo) {
  const PipelinePlan good =
      make_pipeline_plan(PipelineScheduleKind::one_forward_one_backward, 2, 4);
  auto broken = [&](const auto& edit) {
    PipelinePlan p = good;
    edit(p);
    return check_pipeline_plan(p, 4).problem;
  };
  auto position = [](const std::vector<PipelineAction>& actions, Kind kind, int m) {
    return static_cast<size_t>(std::find_if(actions.begin(), actions.end(),
                                            [&](const PipelineAction& a) {
                                              return a.kind == kind && a.micro_batch == m;
                                            }) -
                               actions.begin());
  };
  // Stage 0 never sends micro-batch 2's activation: stage 1 waits for it forever.
  EXPECT_NE(
      broken([&](PipelinePlan& p) {
        p[0].erase(p[0].begin() + static_cast<long>(position(p[0], Kind::send_activation, 2)));
      }).find("stage 1 waits forever to receive the activation of micro-batch 2"),
      std::string::npos);
  // The last stage waits for a gradient from the stage after it: there is no stage 2.
  EXPECT_NE(broken([&](PipelinePlan& p) {
              p[1][0] = PipelineAction{Kind::receive_gradient, 0};
            }).find("there is no stage 2"),
            std::string::npos);
  // A backward before its forward.
  EXPECT_NE(broken([&](PipelinePlan& p) {
              std::swap(p[1][position(p[1], Kind::forward, 0)],
                        p[1][position(p[1], Kind::backward, 0)]);
            }).find("the backward of micro-batch 0: before its forward"),
            std::string::npos);
  // A forward run twice (and micro-batch 3's never).
  EXPECT_NE(broken([&](PipelinePlan& p) {
              p[0][position(p[0], Kind::forward, 3)].micro_batch = 2;
            }).find("the forward of micro-batch 2: runs twice"),
            std::string::npos);
  // A message nobody reads.
  EXPECT_NE(
      broken([&](PipelinePlan& p) {
        p[1].erase(p[1].begin() + static_cast<long>(position(p[1], Kind::receive_activation, 1)));
      }).find("micro-batch 1"),
      std::string::npos);
  // The same activation sent twice.
  EXPECT_NE(broken([&](PipelinePlan& p) {
              p[0][position(p[0], Kind::send_activation, 1)].micro_batch = 0;
            }).find("send the activation of micro-batch 0: sent twice"),
            std::string::npos);
  // A micro-batch that does not exist.
  EXPECT_NE(broken([&](PipelinePlan& p) { p[0][0].micro_batch = 4; }).find("no such micro-batch"),
            std::string::npos);
}

TEST(PipelineSchedule, ANonsensicalShapeIsRefused) {
  EXPECT_THROW(make_pipeline_plan(PipelineScheduleKind::gpipe, 0, 4), Error);
  EXPECT_THROW(make_pipeline_plan(PipelineScheduleKind::gpipe, 2, 0), Error);
}

}  // namespace
}  // namespace crest
