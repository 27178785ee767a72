// crest bench pipeline under mpirun: a CosmoFlow cut into 2 stages trains, and the JSON line says
// what each stage held (GPipe keeps every micro-batch's activations, 1F1B at most K - s, with
// recomputation one set; the cuts a time-balanced cut measured before its last); 2 stages x 2
// replicas on 4 ranks, their exchange also lagged; 2 stages each split spatially in two; and every
// bad flag exits 2 naming it.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "support/cli_util.hpp"

namespace crest {
namespace {

using test::run_crest_mpi;

const std::string kBench =
    "bench pipeline --model cosmoflow --size 32 --conv-size 4 --micro-batches 4 "
    "--steps 2 --warmup 1 --threads 1 --timeout-s 60 ";

std::vector<int> activation_sets(const nlohmann::json& line) {
  std::vector<int> sets;
  for (const auto& s : line["stages"]) sets.push_back(s["activation_sets"].get<int>());
  return sets;
}

TEST(PipelineBench, TwoStagesTrainAndReportWhatEachHeld) {
  const auto r = run_crest_mpi(2, kBench);
  ASSERT_EQ(r.code, 0) << r.out;
  const auto lines = test::json_lines(r.out);
  ASSERT_EQ(lines.size(), 1u) << r.out;
  const auto& j = lines[0];
  EXPECT_EQ(j["bench"], "pipeline");
  EXPECT_EQ(j["pipeline_stages"], 2);
  EXPECT_EQ(j["data_parallel"], 1);
  EXPECT_EQ(j["global_batch"], 4);
  EXPECT_DOUBLE_EQ(j["bubble_schedule"].get<double>(), 0.2);
  ASSERT_EQ(j["stages"].size(), 2u);
  EXPECT_EQ(j["stages"][0]["first_layer"], "conv1");
  EXPECT_EQ(j["stages"][1]["last_layer"], "loss");
  EXPECT_EQ(activation_sets(j), (std::vector<int>{2, 1}));
  EXPECT_GT(j["stages"][0]["compute_s"].get<double>(), 0);
  EXPECT_GE(j["schedule_s_min"].get<double>(), j["stages"][0]["compute_s"].get<double>());
  const double bubble = j["bubble_measured"].get<double>();
  EXPECT_GT(bubble, 0);
  EXPECT_LT(bubble, 1);
  // Each rank holds its stage's parameters and gradients and nothing of the whole model: not
  // even rank 0, which writes checkpoints as the stages send it their tensors.
  EXPECT_GT(j["stages"][0]["parameter_mb"].get<double>(), 0);
  EXPECT_GT(j["stages"][1]["parameter_mb"].get<double>(), 0);
  EXPECT_EQ(j["stages"][0]["whole_model_parameter_mb"].get<double>(), 0);
  EXPECT_EQ(j["stages"][1]["whole_model_parameter_mb"].get<double>(), 0);
  // The cuts measured before the last (--rebalance 2: at most two), each stage's time in each.
  ASSERT_TRUE(j["earlier_cuts"].is_array());
  EXPECT_LE(j["earlier_cuts"].size(), 2u);
  for (const auto& cut : j["earlier_cuts"]) {
    ASSERT_EQ(cut["stage_compute_s"].size(), 2u);
    EXPECT_GT(cut["stage_compute_s"][0].get<double>(), 0);
  }
  const auto kept = test::json_lines(run_crest_mpi(2, kBench + "--rebalance 0").out);
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_TRUE(kept[0]["earlier_cuts"].empty());

  const auto gpipe = test::json_lines(run_crest_mpi(2, kBench + "--schedule gpipe").out);
  ASSERT_EQ(gpipe.size(), 1u);
  EXPECT_EQ(activation_sets(gpipe[0]), (std::vector<int>{4, 4}));
  const auto recompute = test::json_lines(run_crest_mpi(2, kBench + "--recompute").out);
  ASSERT_EQ(recompute.size(), 1u);
  EXPECT_EQ(activation_sets(recompute[0]), (std::vector<int>{1, 1}));
  // Named cut points: the stage starts where it is told.
  const auto named = test::json_lines(run_crest_mpi(2, kBench + "--stage-starts conv3").out);
  ASSERT_EQ(named.size(), 1u);
  EXPECT_EQ(named[0]["stages"][1]["first_layer"], "conv3");
}

TEST(PipelineBench, TwoStagesTimesTwoReplicasOnFourRanks) {
  const auto r = run_crest_mpi(4, kBench + "--stages 2 --optimizer LAMB", 300);
  ASSERT_EQ(r.code, 0) << r.out;
  const auto lines = test::json_lines(r.out);
  ASSERT_EQ(lines.size(), 1u) << r.out;
  EXPECT_EQ(lines[0]["pipeline_stages"], 2);
  EXPECT_EQ(lines[0]["data_parallel"], 2);
  EXPECT_EQ(lines[0]["global_batch"], 8);
  EXPECT_EQ(lines[0]["optimizer"], "LAMB");
  EXPECT_EQ(lines[0]["gradient_lag"], 0);
}

// --gradient-lag 1 (and its local correction) lags the replicas' allreduce behind the next
// batch's schedule, as train.gradient_lag does; the JSON line says which ran.
TEST(PipelineBench, TheReplicasExchangeLagsBehindTheNextBatch) {
  for (const std::string correction : {"none", "local"}) {
    const auto r = run_crest_mpi(
        4, kBench + "--stages 2 --gradient-lag 1 --lag-correction " + correction, 300);
    ASSERT_EQ(r.code, 0) << r.out;
    const auto lines = test::json_lines(r.out);
    ASSERT_EQ(lines.size(), 1u) << r.out;
    EXPECT_EQ(lines[0]["data_parallel"], 2);
    EXPECT_EQ(lines[0]["gradient_lag"], 1);
    EXPECT_EQ(lines[0]["lag_correction"], correction);
  }
}

// --spatial: 2 stages, each a group of 2 ranks splitting the samples' depth. Each stage's figures
// are its first rank's: a block of each of the stage's activations, less than the unsplit stage's
// (the same cut: a measured one may move between runs).
TEST(PipelineBench, TwoStagesEachSplitInTwoOnFourRanks) {
  const std::string cut = kBench + "--stage-starts conv3 ";
  const auto whole = test::json_lines(run_crest_mpi(2, cut).out);
  ASSERT_EQ(whole.size(), 1u);
  const auto r = run_crest_mpi(4, cut + "--stages 2 --spatial 2,1,1", 300);
  ASSERT_EQ(r.code, 0) << r.out;
  const auto lines = test::json_lines(r.out);
  ASSERT_EQ(lines.size(), 1u) << r.out;
  const auto& j = lines[0];
  EXPECT_EQ(j["pipeline_stages"], 2);
  EXPECT_EQ(j["ranks_per_sample"], 2);
  EXPECT_EQ(j["data_parallel"], 1);
  EXPECT_EQ(j["global_batch"], 4);
  ASSERT_EQ(j["stages"].size(), 2u);
  EXPECT_EQ(j["stages"][0]["stage"], 0);
  EXPECT_EQ(j["stages"][1]["stage"], 1);
  for (size_t s = 0; s < 2; ++s)
    EXPECT_LT(j["stages"][s]["activation_mb"].get<double>(),
              whole[0]["stages"][s]["activation_mb"].get<double>())
        << "stage " << s;
  const auto bad = run_crest_mpi(2, kBench + "--stages 2 --spatial 2,1,1");
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("bench pipeline: --spatial: [2, 1, 1] splits each sample among 2 ranks "
                         "in each of 2 pipeline stages"),
            std::string::npos)
      << bad.out;
}

TEST(PipelineBench, BadFlagsAreNamed) {
  for (const auto& [flags, said] : std::vector<std::pair<std::string, std::string>>{
           {"--schedule interleaved", "--schedule is gpipe or 1f1b, got 'interleaved'"},
           {"--stage-starts conv2,conv3", "--stage-starts names 2 layers for 2 stages"},
           {"--stage-starts nosuch", "--stage-starts: the model has no layer named 'nosuch'"},
           {"--stages 3", "--stages 3 does not divide the 2 ranks"},
           {"--balance luck", "--balance is time or flops"},
           {"--batch 0", "--batch >= 1"},
           {"--rebalance -1", "--rebalance >= 0"},
           {"--gradient-lag 2", "bench pipeline: --gradient-lag is 0 or 1, got 2"},
           {"--gradient-lag 1 --lag-correction yes", "--lag-correction is none or local"},
           {"--lag-correction local", "--lag-correction local corrects --gradient-lag 1"}}) {
    const auto r = run_crest_mpi(2, kBench + flags);
    EXPECT_EQ(r.code, 2) << flags << "\n" << r.out;
    EXPECT_NE(r.out.find(said), std::string::npos) << flags << "\n" << r.out;
  }
}

}  // namespace
}  // namespace crest
