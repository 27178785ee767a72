// crest bench train --spatial and bench infer --spatial under mpirun: CosmoFlow's samples split
// among the ranks of a group (the split program itself is proven in tests/spatial), their figures
// counted once per sample, DeepCAM with batch norm on the blocks, and the refusals of
// decompositions the job or the model cannot take.
#include <gtest/gtest.h>

#include <string>

#include "support/cli_util.hpp"

namespace crest {
namespace {

using test::json_lines;
using test::run_crest_mpi;

TEST(SpatialBench, TrainSplitsEachSampleAmongTheGroup) {
  const auto r = run_crest_mpi(
      2,
      "bench train --size 32 --batch 1 --steps 1 --warmup 1 --threads 1 --spatial 2,1,1 "
      "--profile");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto lines = json_lines(r.out);
  ASSERT_FALSE(lines.empty()) << r.out;
  const auto& j = lines[0];
  EXPECT_EQ(j["spatial"], "2,1,1");
  EXPECT_EQ(j["data_parallel"], 1);
  EXPECT_EQ(j["global_batch"], 1);  // one sample, held by two ranks
  EXPECT_NEAR(j["samples_per_s"].get<double>(), 1.0 / j["step_s_min"].get<double>(), 1e-9);
  // The profile: conv1 runs split, and the blocks are gathered before the dense head (at 32^3
  // the last pooling has 1 output row for 2 parts, so the volume is gathered before it).
  bool conv1_split = false, gathered = false;
  for (const auto& l : lines) {
    if (l.value("layer", "") == "conv1")
      conv1_split = l.value("implementation", "").rfind("split 2 ways", 0) == 0;
    gathered = gathered || l.value("kind", "") == "spatial_gather";
  }
  EXPECT_TRUE(conv1_split) << r.out;
  EXPECT_TRUE(gathered) << r.out;
}

// DeepCAM's batch norms run on the blocks: the training session must give them the group's
// statistics (without them the first forward is refused).
TEST(SpatialBench, TrainSplitsDeepCamWithBatchNormOverTheGroup) {
  const auto r = run_crest_mpi(2,
                               "bench train --model deepcam --height 32 --width 48 --batch 1 "
                               "--steps 1 --warmup 1 --threads 1 --spatial 2,1 --profile");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto lines = json_lines(r.out);
  ASSERT_FALSE(lines.empty()) << r.out;
  EXPECT_EQ(lines[0]["spatial"], "2,1");
  EXPECT_EQ(lines[0]["global_batch"], 1);
  bool conv1_split = false;
  for (const auto& l : lines)
    if (l.value("layer", "") == "xception_features.conv1")
      conv1_split = l.value("implementation", "").rfind("split 2 ways", 0) == 0;
  EXPECT_TRUE(conv1_split) << r.out;
}

TEST(SpatialBench, RefusesADecompositionTheJobOrTheModelCannotTake) {
  const auto uneven = run_crest_mpi(2, "bench train --size 32 --steps 1 --spatial 3,1,1");
  EXPECT_EQ(uneven.code, 2) << uneven.out;
  EXPECT_NE(uneven.out.find("--spatial: [3, 1, 1] splits each sample among 3 ranks, which does "
                            "not divide the job's 2 ranks"),
            std::string::npos)
      << uneven.out;
  const auto axes = run_crest_mpi(2, "bench train --size 32 --steps 1 --spatial 2,1");
  EXPECT_EQ(axes.code, 2) << axes.out;
  EXPECT_NE(axes.out.find("dist.spatial: no input of the model has as many spatial axes"),
            std::string::npos)
      << axes.out;
}

// 4 ranks: 2 groups of 2, each pass 2 samples; one JSON line, from rank 0.
TEST(SpatialBench, InferSplitsEachSampleAmongTheGroup) {
  const auto r = run_crest_mpi(
      4, "bench infer --size 32 --batch 1 --passes 2 --warmup 1 --threads 1 --spatial 1,1,2");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto lines = json_lines(r.out);
  ASSERT_EQ(lines.size(), 1u) << r.out;
  const auto& j = lines[0];
  EXPECT_EQ(j["spatial"], "1,1,2");
  EXPECT_EQ(j["data_parallel"], 2);
  EXPECT_EQ(j["ranks"], 4);
  EXPECT_NEAR(j["samples_per_s"].get<double>(), 2e3 / j["latency_ms_min"].get<double>(), 1e-9);
  const auto uneven = run_crest_mpi(2, "bench infer --size 32 --passes 1 --spatial 4,1,1");
  EXPECT_EQ(uneven.code, 2) << uneven.out;
  EXPECT_NE(uneven.out.find("bench infer: --spatial: [4, 1, 1] splits each sample among 4 ranks"),
            std::string::npos)
      << uneven.out;
}

}  // namespace
}  // namespace crest
