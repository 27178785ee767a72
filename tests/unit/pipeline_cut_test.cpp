// A graph cut into pipeline stages (crest/graph/pipeline_cut.hpp), in one process: which values
// each stage receives and sends (a value that crosses two cuts passes through the stage between),
// the inputs and nodes each stage graph holds, the balanced cut, and every way of naming a bad cut
// (the MPI runs of the stages are tests/pipeline). Also the compile fix the stages needed: a
// fusable activation whose output is a marked output keeps storage of its own.
#include "crest/graph/pipeline_cut.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "crest/backends/kernels.hpp"
#include "crest/core/error.hpp"
#include "crest/graph/executor.hpp"
#include "crest/layers/activation.hpp"
#include "crest/layers/conv.hpp"
#include "crest/layers/elementwise.hpp"
#include "crest/layers/loss.hpp"

namespace crest {
namespace {

// x -> a (conv) -> b (tanh) -> c (conv) -> d = b + c -> loss(d, y): b is read by c and by d.
Graph chain() {
  Graph g;
  const ValueId x = g.input("x", Shape{1, 4, 4});
  const ValueId y = g.input("y", Shape{2, 4, 4});
  ConvOptions c;
  c.out_channels = 2;
  c.kernel = {3, 3};
  c.same = true;
  const ValueId a = g.add("a", layers::conv(c), {x});
  const ValueId b = g.add("b", layers::tanh(), {a});
  const ValueId cv = g.add("c", layers::conv(c), {b});
  const ValueId d = g.add("d", layers::add(), {b, cv});
  g.mark_output(d);
  g.set_loss(g.add("loss", layers::mse_loss(), {d, y}));
  return g;
}

std::vector<std::string> input_names(const Graph& g) {
  std::vector<std::string> names;
  for (const auto& in : g.inputs()) names.push_back(in.name);
  return names;
}

std::vector<std::string> node_names(const Graph& g) {
  std::vector<std::string> names;
  for (const auto& n : g.nodes()) names.push_back(n.name);
  return names;
}

using Names = std::vector<std::string>;

TEST(PipelineCut, StagesReceiveSendAndPassValuesThrough) {
  const auto s = cut_into_stages(chain(), {"b", "d"}, "dist.pipeline.stage_starts");
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].data_inputs, Names{"x"});
  EXPECT_EQ(s[0].sent, Names{"a"});
  EXPECT_EQ(input_names(s[0].graph), (Names{"x", "a.gradient"}));
  EXPECT_EQ(node_names(s[0].graph), (Names{"a", "upstream_gradient"}));
  // b crosses the cut before d twice over: read by c (stage 1) and by d (stage 2).
  EXPECT_EQ(s[1].received, Names{"a"});
  EXPECT_EQ(s[1].sent, (Names{"b", "c"}));
  EXPECT_TRUE(s[1].data_inputs.empty());
  EXPECT_EQ(s[1].first_node, 1u);
  EXPECT_EQ(s[1].first_node_name, "b");
  EXPECT_EQ(s[1].last_node_name, "c");
  EXPECT_EQ(s[2].received, (Names{"b", "c"}));
  EXPECT_EQ(s[2].data_inputs, Names{"y"});
  EXPECT_TRUE(s[2].sent.empty());
  EXPECT_EQ(node_names(s[2].graph), (Names{"d", "loss"}));
  EXPECT_GE(s[2].graph.loss(), 0);
  ASSERT_EQ(s[2].graph.outputs().size(), 1u);  // the whole graph's marked output
  // A value made in stage 0 and read only in stage 2 passes through stage 1.
  const auto through = cut_into_stages(chain(), {"c", "d"}, "k");
  EXPECT_EQ(through[1].received, Names{"b"});
  EXPECT_EQ(through[1].sent, (Names{"b", "c"}));
  EXPECT_EQ(input_names(through[1].graph), (Names{"b", "b.gradient", "c.gradient"}));
}

TEST(PipelineCut, OneStageIsTheWholeGraph) {
  const auto s = cut_into_stages(chain(), {}, "k");
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(node_names(s[0].graph), node_names(chain()));
  EXPECT_TRUE(s[0].received.empty());
  EXPECT_TRUE(s[0].sent.empty());
}

TEST(PipelineCut, BadCutsAreNamed) {
  auto message = [](const std::vector<std::string>& starts) {
    try {
      cut_into_stages(chain(), starts, "dist.pipeline.stage_starts");
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), 2);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(
      message({"nope"}).find("dist.pipeline.stage_starts: the model has no layer named 'nope'"),
      std::string::npos);
  EXPECT_NE(message({"c", "b"}).find("starts at layer 'b', which is not after"), std::string::npos);
  EXPECT_NE(message({"a"}).find("not after"), std::string::npos);  // stage 0 would be empty
  EXPECT_NE(message({"loss"}).find("no error"), std::string::npos);
  Graph no_loss;
  no_loss.add("a", layers::tanh(), {no_loss.input("x", Shape{2})});
  EXPECT_THROW(cut_into_stages(no_loss, {}, "k"), Error);
}

TEST(PipelineCut, TheLossMustBeInTheLastStage) {
  Graph g = chain();
  g.add("after", layers::tanh(), {g.output_of("d")});
  try {
    cut_into_stages(g, {"after"}, "dist.pipeline.stage_starts");
    FAIL() << "a cut after the loss was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the loss layer 'loss' must be in the last stage"),
              std::string::npos)
        << e.what();
  }
}

TEST(PipelineCut, BalancedStartsMinimiseTheLargestStage) {
  EXPECT_EQ(balanced_stage_starts({1, 1, 1, 1}, 2), (std::vector<size_t>{2}));
  EXPECT_EQ(balanced_stage_starts({5, 1, 1, 1, 1, 1}, 2), (std::vector<size_t>{1}));
  EXPECT_EQ(balanced_stage_starts({1, 2, 3, 4, 5, 6}, 3), (std::vector<size_t>{3, 5}));
  EXPECT_EQ(balanced_stage_starts({3, 3, 3}, 3), (std::vector<size_t>{1, 2}));
  EXPECT_TRUE(balanced_stage_starts({3, 3, 3}, 1).empty());
  EXPECT_THROW(balanced_stage_starts({1, 2}, 3), Error);
  EXPECT_THROW(balanced_stage_starts({1, 2}, 0), Error);
}

// Stage 0 measured twice as slow as its costs said: its nodes cost double, the cut moves up.
TEST(PipelineCut, CostsScaledToTheStagesMeasuredTimesMoveTheCut) {
  const std::vector<double> costs{1, 1, 1, 1, 1, 1};
  const std::vector<size_t> starts = balanced_stage_starts(costs, 2);
  ASSERT_EQ(starts, (std::vector<size_t>{3}));
  const std::vector<double> scaled = costs_scaled_to_stages(costs, starts, {6, 3});
  EXPECT_EQ(scaled, (std::vector<double>{2, 2, 2, 1, 1, 1}));
  EXPECT_EQ(balanced_stage_starts(scaled, 2), (std::vector<size_t>{2}));
  // Three stages; one with no cost and one with no time keep theirs.
  EXPECT_EQ(costs_scaled_to_stages({0, 0, 2, 2, 4}, {2, 4}, {1, 8, 0}),
            (std::vector<double>{0, 0, 4, 4, 4}));
  EXPECT_THROW(costs_scaled_to_stages(costs, starts, {1}), Error);
  EXPECT_THROW(costs_scaled_to_stages(costs, {4, 2}, {1, 1, 1}), Error);
}

// The activation's forward would not run (fused into the convolution) while its marked output
// had storage of its own: the stage sent zeros.
TEST(PipelineCut, AMarkedOutputOfAFusableActivationHoldsItsValues) {
  Graph g;
  const ValueId x = g.input("x", Shape{1, 4, 4});
  ConvOptions c;
  c.out_channels = 2;
  c.kernel = {3, 3};
  c.same = true;
  const ValueId act = g.add("act", layers::tanh(), {g.add("conv", layers::conv(c), {x})});
  g.mark_output(act);
  for (const std::string& backend_name : backend_names()) {
    if (backend_name == "cuda") continue;
    SCOPED_TRACE(backend_name);
    auto backend = make_backend(backend_name);
    CompileOptions o;
    o.training = false;
    o.loss = false;
    Executor ex(g, *backend, o);
    for (int64_t i = 0; i < 16; ++i) ex.input("x").as<float>()[i] = 0.1f * static_cast<float>(i);
    ex.forward(false);
    double sum = 0;
    for (int64_t i = 0; i < 32; ++i) sum += std::fabs(ex.output(act).as<float>()[i]);
    EXPECT_GT(sum, 0.1);
    for (int64_t i = 0; i < 32; ++i) EXPECT_LT(std::fabs(ex.output(act).as<float>()[i]), 1.0f);
  }
}

}  // namespace
}  // namespace crest
