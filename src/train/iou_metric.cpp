// iou: the DeepCAM segmentation score, as the reference computes it (utils/metric.py
// compute_score): the predicted class of a pixel is the first class with the highest score
// (torch.argmax), and per sample and class c, IoU_c = tp / (tp + fp + fn), a class absent from
// both the prediction and the labels scoring 1; the sample's IoU is the mean over the classes,
// formed in float32 as the reference does (tp / (3 (tp + fp + fn)), summed over the classes).
// The metric is Σ per-sample IoU / samples, kept as the two running sums [Σ IoU, samples], so
// the figure over batches and ranks is the mean over every validation sample. Its counts are
// per sample and class [tp, fp, fn] (doubles: exact up to 2^53 pixels), so a spatially split
// sample's blocks count theirs and the group's sum is the sample's.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "crest/core/error.hpp"
#include "crest/train/metric.hpp"

namespace crest {
namespace {

// Prediction scores [N, classes, spatial...] (float, plain or channels-last) against int32
// labels [N, spatial...].
std::string check_segmentation(const TensorDesc& pred, const TensorDesc& target) {
  const Shape& p = pred.shape;
  const Shape& t = target.shape;
  if (pred.dtype != DType::f32 && pred.dtype != DType::f64)
    return "it reads float class scores, not " + dtype_name(pred.dtype);
  if (pred.layout == Layout::blocked) return "it cannot read a blocked prediction";
  if (target.dtype != DType::i32)
    return "it reads int32 class labels, not " + dtype_name(target.dtype) + " targets";
  if (p.rank() < 3 || t.rank() != p.rank() - 1)
    return "it needs class scores [N, classes, H, W] and labels [N, H, W]";
  for (int d = 0; d < t.rank(); ++d)
    if (t[d] != p[d == 0 ? 0 : d + 1])
      return "the labels " + t.str() + " do not match the class scores " + p.str();
  if (p[1] < 2) return "it needs at least 2 classes, the prediction has " + std::to_string(p[1]);
  return "";
}

// Per class of one sample: true positives, false positives and false negatives, laid out
// [tp, fp, fn] per class; counts of parts of a sample add up to the sample's.
struct ClassCounts {
  double* n;
  double& tp(int64_t c) { return n[3 * c]; }
  double& fp(int64_t c) { return n[3 * c + 1]; }
  double& fn(int64_t c) { return n[3 * c + 2]; }
};

// Where class c of pixel p of one sample is: plain [C, P] or channels-last [P, C].
struct ScoreLayout {
  int64_t pixel_stride, class_stride;
};

// torch.argmax: the first index of the maximum; a NaN counts as the maximum.
template <typename T>
int64_t argmax_class(const T* scores, int64_t classes, int64_t class_stride) {
  int64_t best = 0;
  T best_value = scores[0];
  for (int64_t c = 1; c < classes; ++c) {
    const T v = scores[c * class_stride];
    if (!std::isnan(best_value) && !(v <= best_value)) {
      best = c;
      best_value = v;
    }
  }
  return best;
}

template <typename T>
void count_sample(const T* scores, const int32_t* labels, int64_t classes, int64_t pixels,
                  ScoreLayout at, ClassCounts n) {
  std::fill(n.n, n.n + 3 * classes, 0.0);
  for (int64_t p = 0; p < pixels; ++p) {
    const int64_t predicted = argmax_class(scores + p * at.pixel_stride, classes, at.class_stride);
    const int64_t label = labels[p];
    if (predicted == label) {
      ++n.tp(predicted);
      continue;
    }
    ++n.fp(predicted);
    if (label >= 0 && label < classes) ++n.fn(label);
  }
}

// The reference's float32 arithmetic: tp / (classes * union) per class, NaN (an empty union)
// replaced by 1 / classes, summed over the classes.
float sample_iou(const double* counts, int64_t classes) {
  const auto absent = static_cast<float>(1.0 / static_cast<double>(classes));
  float sum = 0;
  for (const double* n = counts; n < counts + 3 * classes; n += 3) {
    const auto tp = static_cast<int64_t>(n[0]);
    const int64_t uni = (tp + static_cast<int64_t>(n[1]) + static_cast<int64_t>(n[2])) * classes;
    sum += uni == 0 ? absent : static_cast<float>(tp) / static_cast<float>(uni);
  }
  return sum;
}

template <typename T>
void count_samples(const TensorView& pred, const TensorView& target, double* counts) {
  const Shape& s = pred.shape();
  const int64_t batch = s[0], classes = s[1], pixels = s.numel() / (batch * classes);
  const ScoreLayout at = pred.desc().layout == Layout::channels_last ? ScoreLayout{classes, 1}
                                                                     : ScoreLayout{1, pixels};
  const T* scores = pred.as<const T>();
  const int32_t* labels = target.as<const int32_t>();
  for (int64_t i = 0; i < batch; ++i)
    count_sample(scores + i * classes * pixels, labels + i * pixels, classes, pixels, at,
                 ClassCounts{counts + i * 3 * classes});
}

void count_iou(const TensorView& pred, const TensorView& target, double* counts) {
  if (const std::string problem = check_segmentation(pred.desc(), target.desc()); !problem.empty())
    throw_input("metric iou: " + problem);
  if (pred.dtype() == DType::f64) return count_samples<double>(pred, target, counts);
  count_samples<float>(pred, target, counts);
}

// Each sample's IoU from its whole counts, into [Σ IoU, samples].
void add_sample_ious(const double* counts, int64_t samples, int64_t per_sample, double* sums) {
  for (int64_t i = 0; i < samples; ++i) {
    sums[0] += sample_iou(counts + i * per_sample, per_sample / 3);
    sums[1] += 1;
  }
}

Metric make_iou_metric() {
  return {"iou",
          "iou",
          "intersection over union",
          false,
          2,
          check_segmentation,
          [](const TensorDesc& pred) { return 3 * pred.shape[1]; },
          count_iou,
          add_sample_ious,
          [](const double* sums) { return sums[1] > 0 ? sums[0] / sums[1] : 0; }};
}

}  // namespace

CREST_REGISTER_METRIC(iou, make_iou_metric());

}  // namespace crest
