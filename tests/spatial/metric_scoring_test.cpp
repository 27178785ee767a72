// The metrics on a split prediction's blocks (train/metric_scoring.hpp): every rank scores its
// block against its block of the whole targets, and the group's sums of the counts give exactly
// the figures of the whole prediction.
#include "train/metric_scoring.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "crest/core/box_copy.hpp"
#include "crest/core/error.hpp"
#include "crest/spatial/spatial_program.hpp"
#include "world.hpp"

namespace crest {
namespace {

constexpr int64_t kSamples = 2, kClasses = 3, kH = 7, kW = 5;

// Drawn scores with ties (whole numbers 0..3), so the first-maximum rule matters too.
std::vector<float> drawn_scores(size_t n, unsigned seed) {
  std::mt19937 draw(seed);
  std::uniform_int_distribution<int> score(0, 3);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(score(draw));
  return v;
}

std::vector<int32_t> drawn_labels(size_t n) {
  std::mt19937 draw(5);
  std::uniform_int_distribution<int32_t> label(0, kClasses - 1);
  std::vector<int32_t> v(n);
  for (int32_t& x : v) x = label(draw);
  return v;
}

// The block of a plain [n, c, h, w] tensor that `split` gives this rank (written out here with
// box_transfer, not with the split's own copy).
std::vector<float> block_of(const std::vector<float>& whole, const Shape& global,
                            const SpatialSplit& split) {
  const Shape local = split.local_shape(global);
  std::vector<int64_t> start{0, 0};
  for (int64_t s : split.block_start(global)) start.push_back(s);
  std::vector<float> out(static_cast<size_t>(local.numel()));
  box_transfer(whole.data(), BoxAt{global.to_vector(), start}, out.data(),
               BoxAt{local.to_vector(), std::vector<int64_t>(4, 0)}, local.to_vector(), DType::f32,
               BoxOp::copy);
  return out;
}

TensorView view(std::vector<float>& v, const Shape& s) {
  return TensorView(v.data(), {s, DType::f32});
}

// Each decomposition of the world along the height, the width, and 2 x 2 on 4 ranks.
std::vector<std::vector<int>> grids(int ranks) {
  std::vector<std::vector<int>> g{{ranks, 1}, {1, ranks}};
  if (ranks == 4) g.push_back({2, 2});
  return g;
}

TEST(MetricScoring, BlocksScoreExactlyAsTheWholePrediction) {
  Communicator& world = test::world();
  const Shape pred_shape{kSamples, kClasses, kH, kW}, labels_shape{kSamples, kH, kW};
  std::vector<float> pred = drawn_scores(size_t(pred_shape.numel()), 3);
  std::vector<float> regression_target = drawn_scores(size_t(pred_shape.numel()), 4);
  std::vector<int32_t> labels = drawn_labels(size_t(labels_shape.numel()));
  const TensorView labels_view(labels.data(), {labels_shape, DType::i32});
  const Metric& iou = find_metric("iou", "test");
  const Metric& mae = find_metric("mae", "test");

  MetricScoring whole({&iou}), whole_mae({&mae});
  std::vector<double> want(whole.sums()), want_mae(whole_mae.sums());
  whole.add(view(pred, pred_shape), labels_view, want.data());
  whole_mae.add(view(pred, pred_shape), view(regression_target, pred_shape), want_mae.data());
  for (const std::vector<int>& parts : grids(world.size())) {
    SCOPED_TRACE("grid " + std::to_string(parts[0]) + " x " + std::to_string(parts[1]));
    const auto split = make_spatial_split(world, SpatialGrid{parts});
    std::vector<float> block = block_of(pred, pred_shape, *split);
    const Shape local = split->local_shape(pred_shape);
    ASSERT_LT(local.numel(), pred_shape.numel());
    MetricScoring blocks({&iou}, split.get(), pred_shape.without_batch());
    std::vector<double> got(blocks.sums());
    blocks.add(view(block, local), labels_view, got.data());
    EXPECT_EQ(got, want);  // [Σ IoU, samples]: the counts are integers, summed exactly
    EXPECT_EQ(blocks.values(got.data())[0].value, whole.values(want.data())[0].value);
    // An element-wise metric against a target shaped as the prediction: its block too.
    MetricScoring blocks_mae({&mae}, split.get(), pred_shape.without_batch());
    std::vector<double> got_mae(blocks_mae.sums());
    blocks_mae.add(view(block, local), view(regression_target, pred_shape), got_mae.data());
    EXPECT_EQ(got_mae, want_mae);
  }
}

TEST(MetricScoring, TargetsOfOtherExtentsAreRefusedNamingBothShapes) {
  Communicator& world = test::world();
  const Shape pred_shape{1, kClasses, kH, kW};
  const auto split = make_spatial_split(world, SpatialGrid{{world.size(), 1}});
  std::vector<float> block(size_t(split->local_shape(pred_shape).numel()));
  std::vector<int32_t> labels(size_t(kH * (kW + 1)));
  MetricScoring blocks({&find_metric("iou", "test")}, split.get(), pred_shape.without_batch());
  std::vector<double> sums(blocks.sums());
  try {
    blocks.add(view(block, split->local_shape(pred_shape)),
               TensorView(labels.data(), {Shape{1, kH, kW + 1}, DType::i32}), sums.data());
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("[1, 7, 6]"), std::string::npos) << what;
    EXPECT_NE(what.find("[3, 7, 5]"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace crest
