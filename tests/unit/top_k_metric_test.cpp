// top1_accuracy and top5_accuracy against hand-counted cases: the label among the k highest
// scores, ties ranking the lower class first, NaN scores ranking first (and a NaN at the label
// never right), exact sums over batches, and the pairs they refuse.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "crest/core/error.hpp"
#include "crest/train/metric.hpp"

namespace crest {
namespace {

constexpr int64_t kClasses = 7;

const Metric& top(int k) { return find_metric("top" + std::to_string(k) + "_accuracy", "test"); }

// The sums [right, samples] of one batch of scores [N, kClasses] against labels [N].
std::vector<double> sums_of(const Metric& m, std::vector<double> scores,
                            std::vector<int32_t> labels) {
  const auto n = static_cast<int64_t>(labels.size());
  const TensorView pred(scores.data(), {Shape{n, kClasses}, DType::f64});
  const TensorView target(labels.data(), {Shape{n}, DType::i32});
  std::vector<double> sums(2, 0.0);
  m.accumulate(pred, target, sums.data());
  return sums;
}

// Scores 0, 1, ..., 6 (class 6 highest) for one sample.
std::vector<double> rising() { return {0, 1, 2, 3, 4, 5, 6}; }

TEST(TopKMetric, NamesAndDirection) {
  EXPECT_EQ(top(1).short_name, "top1");
  EXPECT_EQ(top(5).short_name, "top5");
  EXPECT_FALSE(top(1).lower_is_better);
  EXPECT_EQ(&find_metric("Top1-Accuracy", "test"), &top(1));
}

TEST(TopKMetric, TheLabelAmongTheKHighestScoresIsRight) {
  for (int32_t label = 0; label < kClasses; ++label) {
    // Class `label` ranks 7 - label: right at top-1 only for 6, at top-5 for 2..6.
    EXPECT_EQ(sums_of(top(1), rising(), {label})[0], label == 6 ? 1 : 0) << label;
    EXPECT_EQ(sums_of(top(5), rising(), {label})[0], label >= 2 ? 1 : 0) << label;
  }
}

TEST(TopKMetric, TiesRankTheLowerClassFirst) {
  const std::vector<double> flat(kClasses, 0.5);  // every class tied: argmax is class 0
  EXPECT_EQ(sums_of(top(1), flat, {0})[0], 1);
  EXPECT_EQ(sums_of(top(1), flat, {1})[0], 0);
  EXPECT_EQ(sums_of(top(5), flat, {4})[0], 1);
  EXPECT_EQ(sums_of(top(5), flat, {5})[0], 0);
}

TEST(TopKMetric, NanScoresRankFirstAndANanLabelIsWrong) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> s = rising();
  s[0] = nan;  // ahead of class 6
  EXPECT_EQ(sums_of(top(1), s, {6})[0], 0);
  EXPECT_EQ(sums_of(top(5), s, {3})[0], 1);  // ahead of 3: NaN, 6, 5, 4
  EXPECT_EQ(sums_of(top(5), s, {2})[0], 0);
  s = rising();
  s[6] = nan;
  EXPECT_EQ(sums_of(top(1), s, {6})[0], 0);
  EXPECT_EQ(sums_of(top(5), s, {6})[0], 0);
}

TEST(TopKMetric, TheFigureIsTheFractionOfEverySampleOverBatches) {
  std::vector<double> two = rising();
  const std::vector<double> r = rising();
  two.insert(two.end(), r.begin(), r.end());
  std::vector<double> sums = sums_of(top(1), two, {6, 5});
  const std::vector<double> more = sums_of(top(1), rising(), {6});
  sums[0] += more[0];
  sums[1] += more[1];
  EXPECT_EQ(sums[1], 3);
  EXPECT_DOUBLE_EQ(top(1).value(sums.data()), 2.0 / 3.0);
}

TEST(TopKMetric, ALabelOutsideTheClassesIsNeverRight) {
  EXPECT_EQ(sums_of(top(5), rising(), {kClasses})[0], 0);
  EXPECT_EQ(sums_of(top(5), rising(), {-1})[0], 0);
}

TEST(TopKMetric, RefusesPairsItCannotScore) {
  const TensorDesc scores{Shape{4, kClasses}, DType::f32};
  EXPECT_EQ(top(5).check(scores, {Shape{4}, DType::i32}), "");
  EXPECT_NE(top(5).check(scores, {Shape{4}, DType::f32}).find("int32 class labels"),
            std::string::npos);
  EXPECT_NE(top(5)
                .check({Shape{4, 3, 8, 8}, DType::f32}, {Shape{4, 8, 8}, DType::i32})
                .find("[N, classes]"),
            std::string::npos);
  // Five or fewer classes: every sample would be right at top-5.
  EXPECT_NE(top(5).check({Shape{4, 5}, DType::f32}, {Shape{4}, DType::i32}).find("more than 5"),
            std::string::npos);
  std::vector<float> s(size_t{8} * 3, 0.f);
  std::vector<int32_t> l(8, 0);
  const TensorView pred(s.data(), {Shape{8, 3}, DType::f32});
  const TensorView target(l.data(), {Shape{8}, DType::i32});
  std::vector<double> sums(2, 0.0);
  EXPECT_THROW(top(5).accumulate(pred, target, sums.data()), Error);
}

}  // namespace
}  // namespace crest
