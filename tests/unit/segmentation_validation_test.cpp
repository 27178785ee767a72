// Validation of a segmentation task: int32 labels fed to the model's integer input, and an
// every-sample loader's incomplete batches evaluated sample by sample, so the loss and IoU are
// the means over samples that a batch-1 evaluation of each sample gives (the reference validates
// with batch 1), on one rank or split over ranks.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "crest/core/error.hpp"
#include "crest/data/loader.hpp"
#include "crest/layers/conv.hpp"
#include "crest/layers/loss.hpp"
#include "crest/train/batch_feed.hpp"
#include "support/fake_communicator.hpp"
#include "train/validation.hpp"

namespace crest {
namespace {

constexpr int64_t kH = 4, kW = 6, kC = 2;

// x [2, 4, 6] channels-last -> conv3x3 'same' to 3 class scores -> weighted softmax CE.
BuiltModel segmentation_model() {
  BuiltModel m;
  Graph& g = m.graph;
  const ValueId x = g.input("x", Shape{kC, kH, kW}, Layout::channels_last);
  const ValueId y = g.input("y", Shape{kH, kW}, Layout::plain, /*integer=*/true);
  ConvOptions o;
  o.out_channels = 3;
  o.kernel = {3, 3};
  o.same = true;
  m.prediction = g.add("logits", layers::conv(o), {x});
  m.loss = g.add("loss", layers::softmax_cross_entropy({1.0f, 2.6f, 1.7f}), {m.prediction, y});
  g.mark_output(m.prediction);
  g.set_loss(m.loss);
  return m;
}

// DeepCAM-shaped samples in memory: x [H, W, C] floats, labels [H, W] in 0..2.
class SegmentationSource final : public SampleSource {
 public:
  explicit SegmentationSource(int64_t n) : n_(n) {
    spec_.x_shape = Shape{kH, kW, kC};
    spec_.y_shape = Shape{kH, kW};
    spec_.y_integer = true;
    for (int64_t i = 0; i < n; ++i) paths_.push_back("mem/" + std::to_string(i) + ".h5");
  }
  std::string format() const override { return "memory"; }
  const SampleSpec& spec() const override { return spec_; }
  int64_t size() const override { return n_; }
  const std::string& path(int64_t i) const override { return paths_[static_cast<size_t>(i)]; }
  void read(int64_t, std::vector<std::byte>& payload) const override { payload.clear(); }
  void decode(int64_t i, std::span<const std::byte>, float* x, void* y) const override {
    for (int64_t k = 0; k < kH * kW * kC; ++k)
      x[k] =
          static_cast<float>(std::sin(0.7 * static_cast<double>(k) + 1.3 * static_cast<double>(i)));
    auto* labels = static_cast<int32_t*>(y);
    for (int64_t p = 0; p < kH * kW; ++p) labels[p] = static_cast<int32_t>((p / 3 + i) % 3);
  }

 private:
  int64_t n_;
  SampleSpec spec_;
  std::vector<std::string> paths_;
};

Task iou_task(const BuiltModel& m) {
  Task t;
  t.name = "segmentation";
  t.model = m;
  t.metrics = {&find_metric("iou", "test")};
  return t;
}

CompileOptions batch_of(int64_t n) {
  CompileOptions co;
  co.batch = n;
  co.seed = 5;
  return co;
}

// The reference's evaluation: each sample alone (batch 1); the means of loss and IoU.
std::pair<double, double> batch1_means(Backend& backend, const BuiltModel& m,
                                       const SegmentationSource& src) {
  Executor ex(m.graph, backend, batch_of(1));
  BatchFeed feed(ex, m);
  const Metric& iou = find_metric("iou", "test");
  double loss = 0, sums[2] = {0, 0};
  std::vector<float> x(static_cast<size_t>(kH * kW * kC));
  std::vector<int32_t> y(static_cast<size_t>(kH * kW));
  for (int64_t i = 0; i < src.size(); ++i) {
    src.decode(i, {}, x.data(), y.data());
    LoadedBatch b;
    b.sample = TensorView(x.data(), {Shape{1, kH, kW, kC}, DType::f32});
    b.target = TensorView(y.data(), {Shape{1, kH, kW}, DType::i32});
    feed.feed(b);
    ex.forward(false);
    loss += ex.last_data_loss();
    iou.accumulate(feed.host_prediction(), b.target, sums);
  }
  return {loss / static_cast<double>(src.size()), iou.value(sums)};
}

TEST(SegmentationValidation, Int32LabelsFeedTheIntegerInputInPlace) {
  const BuiltModel m = segmentation_model();
  auto backend = make_backend("reference");
  Executor ex(m.graph, *backend, batch_of(2));
  ASSERT_EQ(ex.input("y").dtype(), DType::i32);
  std::vector<float> x(static_cast<size_t>(2 * kH * kW * kC), 0.5f);
  std::vector<int32_t> y(static_cast<size_t>(2 * kH * kW), 2);
  LoadedBatch b;
  b.sample = TensorView(x.data(), {Shape{2, kH, kW, kC}, DType::f32});
  b.target = TensorView(y.data(), {Shape{2, kH, kW}, DType::i32});
  BatchFeed feed(ex, m);
  feed.feed(b);
  EXPECT_EQ(ex.input("y").data(), y.data());  // host memory: bound, not copied
  // Copies of one sample into every place, in the model's own storage.
  y[static_cast<size_t>(kH * kW)] = 1;  // sample 1's first label
  feed.feed_copies_of(b, 1);
  const TensorView in = ex.input("y");
  EXPECT_NE(in.data(), y.data());
  EXPECT_EQ(in.as<int32_t>()[0], 1);
  EXPECT_EQ(in.as<int32_t>()[kH * kW], 1);
  EXPECT_EQ(in.as<int32_t>()[1], 2);
}

TEST(SegmentationValidation, IncompleteBatchesGiveTheMeansOverSamples) {
  const BuiltModel m = segmentation_model();
  auto backend = make_backend("reference");
  auto src = std::make_shared<SegmentationSource>(7);
  const auto [want_loss, want_iou] = batch1_means(*backend, m, *src);

  Executor ex(m.graph, *backend, batch_of(3));  // the same initial weights (same seed)
  BatchFeed feed(ex, m);
  const Task task = iou_task(m);
  MetricScoring scoring(task.metrics);
  LoaderOptions lo;
  lo.batch_size = 3;
  lo.shuffle = false;
  lo.every_sample = true;
  test::FakeCommunicator one(0, 1);
  DataLoader loader(src, lo, one);
  ASSERT_EQ(loader.plan().batches, 3);  // 3 + 3 + 1
  const ValidationResult r = validate(ex, feed, loader, scoring, one, 0);
  EXPECT_EQ(r.samples, 7);
  EXPECT_NEAR(r.loss, want_loss, 1e-6 * std::abs(want_loss));
  ASSERT_EQ(r.metrics.size(), 1u);
  EXPECT_EQ(r.metrics[0].name, "iou");
  EXPECT_NEAR(r.metrics[0].value, want_iou, 1e-12);
  EXPECT_GT(want_iou, 0.0);

  // Split over 3 ranks (3, 2, 2 samples; batches 1 full and 1 partial, or 1 partial): the
  // sample-weighted means of the ranks' figures are the same.
  double loss = 0, iou = 0;
  int64_t samples = 0;
  for (int rank = 0; rank < 3; ++rank) {
    test::FakeCommunicator comm(rank, 3);  // its sums are this rank's alone
    DataLoader shard(src, lo, comm);
    const ValidationResult part = validate(ex, feed, shard, scoring, comm, 0);
    loss += part.loss * static_cast<double>(part.samples);
    iou += part.metrics[0].value * static_cast<double>(part.samples);
    samples += part.samples;
  }
  EXPECT_EQ(samples, 7);
  EXPECT_NEAR(loss / 7, want_loss, 1e-6 * std::abs(want_loss));
  EXPECT_NEAR(iou / 7, want_iou, 1e-12);
}

}  // namespace
}  // namespace crest
