// Batch-norm statistics across ranks (src/engine/batch_norm_sync.cpp): the running statistics
// averaged over all ranks before validation, and the groups of synchronised batch norm.
#include "crest/engine/batch_norm_sync.hpp"

#include <gtest/gtest.h>

#include "crest/graph/executor.hpp"
#include "crest/graph/graph_yaml.hpp"
#include "support/fake_communicator.hpp"

namespace crest {
namespace {

// conv -> batch_norm: trained weights, two evaluation statistics and a counter.
std::unique_ptr<Executor> bn_model(Backend& backend) {
  const Graph g = graph_from_yaml(YAML::Load(R"(
inputs:
  - {name: x, shape: [2, 4, 4]}
layers:
  - {name: conv, kind: conv, out_channels: 3, kernel: [3, 3], padding: [1]}
  - {name: bn, kind: batch_norm}
outputs: [bn]
)"),
                                  "bn_model");
  CompileOptions co;
  co.training = false;
  return std::make_unique<Executor>(g, backend, co);
}

float* slot_values(ParamStore& p, const std::string& name) {
  for (size_t i = 0; i < p.slots().size(); ++i)
    if (p.slots()[i].name == name) return p.value(i).as<float>();
  throw std::runtime_error("no " + name);
}

TEST(BatchNormSync, AveragesRunningStatisticsOverRanksAndNothingElse) {
  auto backend = make_backend("reference");
  auto ex = bn_model(*backend);
  ParamStore& p = ex->params();
  for (int c = 0; c < 3; ++c) {
    slot_values(p, "bn.running_mean")[c] = static_cast<float>(c);
    slot_values(p, "bn.running_var")[c] = 2.f;
  }
  slot_values(p, "bn.num_batches_tracked")[0] = 5;
  const float weight0 = slot_values(p, "conv.weight")[0];
  // Three ranks: the other two hold mean 10 + c and variance 4 each.
  test::FakeCommunicator world(0, 3);
  std::vector<size_t> sizes;
  world.other_ranks_add = [&sizes](double* v, size_t n) {
    sizes.push_back(n);
    for (size_t i = 0; i < n; ++i) v[i] += i < 3 ? 2 * (10.0 + static_cast<double>(i)) : 8.0;
  };
  average_eval_stats(p, world);
  EXPECT_EQ(sizes, std::vector<size_t>{6});  // one collective for all statistics
  for (int c = 0; c < 3; ++c) {
    EXPECT_FLOAT_EQ(slot_values(p, "bn.running_mean")[c], (c + 2 * (10.f + c)) / 3);
    EXPECT_FLOAT_EQ(slot_values(p, "bn.running_var")[c], (2.f + 8.f) / 3);
  }
  EXPECT_EQ(slot_values(p, "bn.num_batches_tracked")[0], 5.f);
  EXPECT_EQ(slot_values(p, "conv.weight")[0], weight0);
}

TEST(BatchNormSync, OneRankChangesNothing) {
  auto backend = make_backend("reference");
  auto ex = bn_model(*backend);
  test::FakeCommunicator world(0, 1);
  bool called = false;
  world.other_ranks_add = [&called](double*, size_t) { called = true; };
  average_eval_stats(ex->params(), world);
  EXPECT_FALSE(called);
}

TEST(BatchNormSync, GroupsMustDivideTheRanks) {
  test::FakeCommunicator world(0, 6);
  EXPECT_EQ(make_batch_norm_group(world, 1), nullptr);
  EXPECT_NE(make_batch_norm_group(world, 3), nullptr);
  try {
    make_batch_norm_group(world, 4);
    FAIL() << "4 does not divide 6";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dist.batchnorm_group_size"), std::string::npos);
  }
}

}  // namespace
}  // namespace crest
