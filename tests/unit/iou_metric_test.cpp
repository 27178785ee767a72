// The iou metric against hand-counted cases of the reference's definition (DeepCAM
// utils/metric.py): argmax over the class scores, per class tp / (tp + fp + fn), a class absent
// from both prediction and labels scoring 1, the mean over classes per sample, then the mean over
// samples.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "crest/core/error.hpp"
#include "crest/train/metric.hpp"

namespace crest {
namespace {

const Metric& iou() { return find_metric("iou", "test"); }

// Scores [N, 3, 1, P] (plain) in which pixel p of sample i predicts classes[i][p].
std::vector<float> scores_for(const std::vector<std::vector<int>>& classes) {
  const size_t pixels = classes.front().size();
  std::vector<float> s(classes.size() * 3 * pixels, 0.f);
  for (size_t i = 0; i < classes.size(); ++i)
    for (size_t p = 0; p < pixels; ++p)
      s[i * 3 * pixels + static_cast<size_t>(classes[i][p]) * pixels + p] = 1.f;
  return s;
}

std::vector<int32_t> flat(const std::vector<std::vector<int>>& labels) {
  std::vector<int32_t> out;
  for (const auto& row : labels) out.insert(out.end(), row.begin(), row.end());
  return out;
}

double score(std::vector<float>& scores, std::vector<int32_t>& labels, int64_t n, int64_t pixels,
             Layout layout = Layout::plain) {
  const TensorView pred(scores.data(), {Shape{n, 3, 1, pixels}, DType::f32, Device::cpu, layout});
  const TensorView target(labels.data(), {Shape{n, 1, pixels}, DType::i32});
  std::vector<double> sums(2, 0.0);
  iou().accumulate(pred, target, sums.data());
  EXPECT_EQ(sums[1], static_cast<double>(n));
  return iou().value(sums.data());
}

double score_of(const std::vector<std::vector<int>>& predicted,
                const std::vector<std::vector<int>>& labels) {
  std::vector<float> s = scores_for(predicted);
  std::vector<int32_t> l = flat(labels);
  return score(s, l, static_cast<int64_t>(labels.size()),
               static_cast<int64_t>(labels.front().size()));
}

TEST(IouMetric, NamesAndDirection) {
  EXPECT_EQ(iou().name, "iou");
  EXPECT_EQ(iou().short_name, "iou");  // val_iou in logs, validation/iou in TensorBoard
  EXPECT_FALSE(iou().lower_is_better);
  EXPECT_EQ(&find_metric("IoU", "test"), &iou());
}

TEST(IouMetric, APerfectPredictionScoresOne) {
  EXPECT_FLOAT_EQ(score_of({{0, 1, 2, 2}}, {{0, 1, 2, 2}}), 1.0);
}

TEST(IouMetric, AClassAbsentFromBothScoresOne) {
  // Only classes 0 and 1 appear; both are perfect: (1 + 1 + 1) / 3.
  EXPECT_FLOAT_EQ(score_of({{0, 0, 1, 1}}, {{0, 0, 1, 1}}), 1.0);
  // Class 0: tp 2, fp 1 -> 2/3; class 1: tp 1, fn 1 -> 1/2; class 2 absent -> 1.
  EXPECT_NEAR(score_of({{0, 0, 0, 1}}, {{0, 0, 1, 1}}), (2.0 / 3 + 0.5 + 1) / 3, 1e-7);
}

TEST(IouMetric, AClassOnlyInTheLabelsScoresZero) {
  // Label class 2 is never predicted: IoU_2 = 0 / (0 + 0 + 2) = 0; class 0: tp 2, fp 2 -> 1/2;
  // class 1 absent from both -> 1.
  EXPECT_NEAR(score_of({{0, 0, 0, 0}}, {{0, 0, 2, 2}}), (0.5 + 1 + 0) / 3, 1e-7);
}

TEST(IouMetric, TheMeanIsOverSamplesAcrossBatches) {
  const double a = score_of({{0, 1}}, {{0, 1}});  // 1
  const double b = score_of({{0, 0}}, {{1, 1}});  // class 0: 0/2, class 1: 0/2, 2: 1
  EXPECT_NEAR(b, 1.0 / 3, 1e-7);
  // One batch of two samples, and the same two samples as two batches: the same mean.
  EXPECT_NEAR(score_of({{0, 1}, {0, 0}}, {{0, 1}, {1, 1}}), (a + b) / 2, 1e-7);
  std::vector<double> sums(2, 0.0);
  std::vector<float> s1 = scores_for({{0, 1}}), s2 = scores_for({{0, 0}}),
                     s3 = scores_for({{0, 0}});
  std::vector<int32_t> l1{0, 1}, l2{1, 1}, l3{1, 1};
  using Sample = std::pair<std::vector<float>*, std::vector<int32_t>*>;
  for (auto [s, l] : std::vector<Sample>{{&s1, &l1}, {&s2, &l2}, {&s3, &l3}}) {
    const TensorView pred(s->data(), {Shape{1, 3, 2}, DType::f32});
    const TensorView target(l->data(), {Shape{1, 2}, DType::i32});
    iou().accumulate(pred, target, sums.data());
  }
  EXPECT_EQ(sums[1], 3.0);
  EXPECT_NEAR(iou().value(sums.data()), (a + 2 * b) / 3, 1e-7);
}

TEST(IouMetric, TiesGoToTheFirstClassAsTorchArgmax) {
  // Pixel 0: classes 1 and 2 tie at 5 -> class 1. Pixel 1: all three tie -> class 0.
  std::vector<float> s{/*c0*/ 0, 7, /*c1*/ 5, 7, /*c2*/ 5, 7};
  std::vector<int32_t> l{1, 0};
  EXPECT_FLOAT_EQ(score(s, l, 1, 2), 1.0);
  std::vector<int32_t> wrong{2, 2};
  // Predicted 1, 0 against 2, 2: class 0 0/1, class 1 0/1, class 2 0/2.
  EXPECT_FLOAT_EQ(score(s, wrong, 1, 2), 0.0);
}

TEST(IouMetric, ReadsChannelsLastScores) {
  // [N=1, C=3, 1, P=2] stored as [P, C]: pixel 0 scores (0, 9, 1), pixel 1 (3, 0, 8).
  std::vector<float> s{0, 9, 1, 3, 0, 8};
  std::vector<int32_t> l{1, 2};
  EXPECT_FLOAT_EQ(score(s, l, 1, 2, Layout::channels_last), 1.0);
  // Read as plain, the same bytes predict other classes.
  EXPECT_LT(score(s, l, 1, 2, Layout::plain), 1.0);
}

TEST(IouMetric, Float64ScoresGiveTheSameCounts) {
  std::vector<double> s{0, 1, 1, 0, 0, 0};  // [1, 3, 2]: pixel 0 -> class 1, pixel 1 -> class 0
  std::vector<int32_t> l{1, 1};
  const TensorView pred(s.data(), {Shape{1, 3, 2}, DType::f64});
  const TensorView target(l.data(), {Shape{1, 2}, DType::i32});
  std::vector<double> sums(2, 0.0);
  iou().accumulate(pred, target, sums.data());
  // Class 0: fp 1 -> 0; class 1: tp 1, fn 1 -> 1/2; class 2 absent -> 1.
  EXPECT_NEAR(iou().value(sums.data()), (0 + 0.5 + 1) / 3, 1e-7);
}

TEST(IouMetric, RefusesWhatItCannotScoreAndSaysWhy) {
  const TensorDesc scores{Shape{2, 3, 4, 4}, DType::f32};
  EXPECT_EQ(iou().check(scores, {Shape{2, 4, 4}, DType::i32}), "");
  EXPECT_NE(iou().check(scores, {Shape{2, 4, 4}, DType::f32}).find("int32"), std::string::npos);
  EXPECT_NE(iou().check(scores, {Shape{2, 4, 5}, DType::i32}).find("do not match"),
            std::string::npos);
  EXPECT_NE(iou().check({Shape{2, 4}, DType::f32}, {Shape{2, 4}, DType::f32}), "");
  try {
    check_metric_fits(iou(), {Shape{2, 4}, DType::f32}, {Shape{2, 4}, DType::f32}, "train.metrics");
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("train.metrics"), std::string::npos) << what;
    EXPECT_NE(what.find("iou"), std::string::npos) << what;
  }
  // And mae cannot score class scores against labels of another size.
  const Metric& mae = find_metric("mae", "test");
  EXPECT_EQ(mae.check({Shape{2, 4}, DType::f32}, {Shape{2, 4}, DType::f32}), "");
  EXPECT_NE(mae.check(scores, {Shape{2, 4, 4}, DType::i32}), "");
}

}  // namespace
}  // namespace crest
