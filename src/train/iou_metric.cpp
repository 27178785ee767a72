// iou: the DeepCAM segmentation score, as the reference computes it (utils/metric.py
// compute_score): the predicted class of a pixel is the first class with the highest score
// (torch.argmax), and per sample and class c, IoU_c = tp / (tp + fp + fn), a class absent from
// both the prediction and the labels scoring 1; the sample's IoU is the mean over the classes,
// formed in float32 as the reference does (tp / (3 (tp + fp + fn)), summed over the classes).
// The metric is Σ per-sample IoU / samples, kept as the two running sums [Σ IoU, samples], so
// the figure over batches and ranks is the mean over every validation sample.
#include <cmath>
#include <cstdint>
#include <vector>

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

struct ClassCounts {
  std::vector<int64_t> tp, fp, fn;
  explicit ClassCounts(int64_t classes)
      : tp(static_cast<size_t>(classes)),
        fp(static_cast<size_t>(classes)),
        fn(static_cast<size_t>(classes)) {}
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
ClassCounts count_sample(const T* scores, const int32_t* labels, int64_t classes, int64_t pixels,
                         ScoreLayout at) {
  ClassCounts n(classes);
  for (int64_t p = 0; p < pixels; ++p) {
    const int64_t predicted = argmax_class(scores + p * at.pixel_stride, classes, at.class_stride);
    const int64_t label = labels[p];
    if (predicted == label) {
      ++n.tp[static_cast<size_t>(predicted)];
      continue;
    }
    ++n.fp[static_cast<size_t>(predicted)];
    if (label >= 0 && label < classes) ++n.fn[static_cast<size_t>(label)];
  }
  return n;
}

// The reference's float32 arithmetic: tp / (classes * union) per class, NaN (an empty union)
// replaced by 1 / classes, summed over the classes.
float sample_iou(const ClassCounts& n, int64_t classes) {
  const auto absent = static_cast<float>(1.0 / static_cast<double>(classes));
  float sum = 0;
  for (size_t c = 0; c < n.tp.size(); ++c) {
    const int64_t uni = (n.tp[c] + n.fp[c] + n.fn[c]) * classes;
    sum += uni == 0 ? absent : static_cast<float>(n.tp[c]) / static_cast<float>(uni);
  }
  return sum;
}

template <typename T>
void add_samples(const TensorView& pred, const TensorView& target, double* sums) {
  const Shape& s = pred.shape();
  const int64_t batch = s[0], classes = s[1], pixels = s.numel() / (batch * classes);
  const ScoreLayout at = pred.desc().layout == Layout::channels_last ? ScoreLayout{classes, 1}
                                                                     : ScoreLayout{1, pixels};
  const T* scores = pred.as<const T>();
  const int32_t* labels = target.as<const int32_t>();
  for (int64_t i = 0; i < batch; ++i) {
    const ClassCounts n =
        count_sample(scores + i * classes * pixels, labels + i * pixels, classes, pixels, at);
    sums[0] += sample_iou(n, classes);
    sums[1] += 1;
  }
}

void accumulate_iou(const TensorView& pred, const TensorView& target, double* sums) {
  if (const std::string problem = check_segmentation(pred.desc(), target.desc()); !problem.empty())
    throw_input("metric iou: " + problem);
  if (pred.dtype() == DType::f64) return add_samples<double>(pred, target, sums);
  add_samples<float>(pred, target, sums);
}

Metric make_iou_metric() {
  return {"iou",
          "iou",
          "intersection over union",
          false,
          2,
          check_segmentation,
          accumulate_iou,
          [](const double* sums) { return sums[1] > 0 ? sums[0] / sums[1] : 0; }};
}

}  // namespace

CREST_REGISTER_METRIC(iou, make_iou_metric());

}  // namespace crest
