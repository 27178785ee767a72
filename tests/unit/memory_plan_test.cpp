#include "crest/graph/memory_plan.hpp"

#include <gtest/gtest.h>

#include <random>

namespace crest {
namespace {

TEST(MemoryPlan, RandomBlocksNeverOverlapWhileAliveAndPeakBelowNaive) {
  std::mt19937 g(7);
  for (int trial = 0; trial < 50; ++trial) {
    MemoryPlan plan;
    const int n = 5 + static_cast<int>(g() % 60);
    for (int i = 0; i < n; ++i) {
      const int a = static_cast<int>(g() % 40), b = static_cast<int>(g() % 40);
      plan.blocks.push_back(
          {"b" + std::to_string(i), 1 + g() % 100000, std::min(a, b), std::max(a, b), 0});
    }
    plan_memory(plan);
    std::string why;
    EXPECT_TRUE(plan_is_valid(plan, &why)) << why;
    EXPECT_LE(plan.arena_bytes, plan.naive_bytes);
    for (const auto& b : plan.blocks) EXPECT_EQ(b.offset % 256, 0u);
  }
}

TEST(MemoryPlan, DisjointLifetimesShareMemory) {
  MemoryPlan plan;
  plan.blocks = {{"a", 1000, 0, 1, 0}, {"b", 1000, 2, 3, 0}, {"c", 1000, 4, 5, 0}};
  plan_memory(plan);
  EXPECT_EQ(plan.arena_bytes, 1024u);  // one 256-aligned slot reused three times
  EXPECT_EQ(plan.naive_bytes, 3072u);
}

TEST(MemoryPlan, ValidatorCatchesOverlap) {
  MemoryPlan plan;
  plan.blocks = {{"a", 512, 0, 3, 0}, {"b", 512, 2, 5, 256}};
  plan.arena_bytes = 1024;
  std::string why;
  EXPECT_FALSE(plan_is_valid(plan, &why));
  EXPECT_NE(why.find("overlaps"), std::string::npos);
}

}  // namespace
}  // namespace crest
