// Gradient checks of the VectorOps that have a derivative: mse, softmax cross-entropy (with
// class weights, and with label smoothing) and dropout, on the reference backend in f64.
#include <gtest/gtest.h>

#include <cmath>

#include "backends/dropout_hash.hpp"
#include "backends/reference/reference_backend.hpp"
#include "gradcheck/gradcheck_util.hpp"

namespace crest {
namespace {

using gradcheck::expect_gradient;
using gradcheck::random_vector;

std::unique_ptr<VectorOps> ops() { return make_reference_backend()->vector_ops(DType::f64); }

// The loss itself is the objective: diff must be d loss / d pred, times diff_scale.
TEST(GradCheck, MseWithDiffScale) {
  auto v = ops();
  const size_t count = 24;
  std::vector<double> pred = random_vector(count, 41);
  const std::vector<double> target = random_vector(count, 42);
  const double diff_scale = 0.75;
  std::vector<double> diff = gradcheck::poisoned(count);
  v->mse(pred.data(), target.data(), diff.data(), count, diff_scale);
  auto loss = [&] { return diff_scale * v->mse(pred.data(), target.data(), nullptr, count, 1.0); };
  expect_gradient("d pred", pred, diff, loss);
}

TEST(GradCheck, SoftmaxCrossEntropyClassWeights) {
  auto v = ops();
  const int64_t n = 2, classes = 4, spatial = 3;
  const auto count = static_cast<size_t>(n * classes * spatial);
  std::vector<double> logits = random_vector(count, 51, -3.0, 3.0);
  const std::vector<int32_t> labels{0, 3, 1, 2, 2, 3};
  const std::vector<float> weights{0.5f, 2.0f, 1.0f, 1.5f};
  const double diff_scale = 1.25;
  std::vector<double> diff = gradcheck::poisoned(count);
  v->softmax_cross_entropy(logits.data(), labels.data(), weights.data(), 0.0, diff.data(), n,
                           classes, spatial, diff_scale);
  auto loss = [&] {
    return diff_scale * v->softmax_cross_entropy(logits.data(), labels.data(), weights.data(), 0.0,
                                                 nullptr, n, classes, spatial, 1.0);
  };
  expect_gradient("d logits", logits, diff, loss);
}

TEST(GradCheck, SoftmaxCrossEntropyLabelSmoothing) {
  auto v = ops();
  const int64_t n = 3, classes = 5, spatial = 1;
  const auto count = static_cast<size_t>(n * classes * spatial);
  std::vector<double> logits = random_vector(count, 53, -3.0, 3.0);
  const std::vector<int32_t> labels{4, 0, 2};
  const double smoothing = 0.1, diff_scale = 0.5;
  std::vector<double> diff = gradcheck::poisoned(count);
  const double loss0 = v->softmax_cross_entropy(logits.data(), labels.data(), nullptr, smoothing,
                                                diff.data(), n, classes, spatial, diff_scale);
  // PyTorch's cross_entropy(label_smoothing=e): mean over samples of
  // (1 - e) * -log p[label] + e / C * sum_c -log p[c].
  double want = 0;
  for (int64_t b = 0; b < n; ++b) {
    double lse = 0;
    for (int64_t c = 0; c < classes; ++c) lse += std::exp(logits[b * classes + c]);
    lse = std::log(lse);
    double all = 0;
    for (int64_t c = 0; c < classes; ++c) all += lse - logits[b * classes + c];
    want += (1 - smoothing) * (lse - logits[b * classes + labels[b]]) + smoothing / classes * all;
  }
  EXPECT_NEAR(loss0, want / n, 1e-14);
  auto loss = [&] {
    return diff_scale * v->softmax_cross_entropy(logits.data(), labels.data(), nullptr, smoothing,
                                                 nullptr, n, classes, spatial, 1.0);
  };
  expect_gradient("d logits", logits, diff, loss);
  for (double bad : {-0.1, 1.0})
    EXPECT_THROW(v->softmax_cross_entropy(logits.data(), labels.data(), nullptr, bad, nullptr, n,
                                          classes, spatial, 1.0),
                 Error);
}

// Dropout is linear in x for a fixed mask: the gradient of sum(r * dropout(x)) is dropout(r)
// with the same seed, which is how backward recomputes the mask.
TEST(GradCheck, DropoutFixedSeed) {
  auto v = ops();
  const size_t count = 200;
  const float p = 0.3f;
  const uint64_t seed = 1234;
  std::vector<double> x = random_vector(count, 61);
  const std::vector<double> r = random_vector(count, 62);
  std::vector<double> y(count);
  v->dropout(x.data(), y.data(), count, p, seed);
  size_t kept = 0;
  for (size_t i = 0; i < count; ++i) {
    const bool keep = dropout_uniform(seed, i) >= p;
    kept += keep;
    EXPECT_DOUBLE_EQ(y[i], keep ? x[i] / (1.0 - static_cast<double>(p)) : 0.0) << "element " << i;
  }
  EXPECT_GT(kept, 0u);
  EXPECT_LT(kept, count);

  std::vector<double> grad(count);
  v->dropout(r.data(), grad.data(), count, p, seed);
  auto loss = [&] {
    v->dropout(x.data(), y.data(), count, p, seed);
    return gradcheck::dot(r, y);
  };
  expect_gradient("d src", x, grad, loss);
}

}  // namespace
}  // namespace crest
