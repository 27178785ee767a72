// top1_accuracy and top5_accuracy: the classification scores of ImageNet training (torchvision's
// reference `accuracy(output, target, topk=(1, 5))`, MLPerf ResNet's eval_accuracy = top-1). A
// sample is right at k when its label is among the k highest of its class scores [N, classes]
// against int32 labels [N]. Ties rank the lower class first and a NaN score above every number,
// as the iou metric's argmax does, so top-1 is exactly "argmax == label" and a NaN at the label
// scores wrong. The counts per sample are [right, 1], the sums [right, samples]: the figure over
// batches and ranks is the fraction of every validation sample.
#include <cmath>
#include <cstdint>
#include <string>

#include "crest/core/error.hpp"
#include "crest/train/metric.hpp"

namespace crest {
namespace {

std::string check_classification(const TensorDesc& pred, const TensorDesc& target, int64_t k) {
  const Shape& p = pred.shape;
  if (pred.dtype != DType::f32 && pred.dtype != DType::f64)
    return "it reads float class scores, not " + dtype_name(pred.dtype);
  if (pred.layout == Layout::blocked) return "it cannot read a blocked prediction";
  if (target.dtype != DType::i32)
    return "it reads int32 class labels, not " + dtype_name(target.dtype) + " targets";
  if (p.rank() != 2 || target.shape.rank() != 1 || target.shape[0] != p[0])
    return "it needs class scores [N, classes] and labels [N], got " + p.str() + " and " +
           target.shape.str();
  if (p[1] <= k)
    return "it needs more than " + std::to_string(k) + " classes (with " + std::to_string(p[1]) +
           " every sample would score right)";
  return "";
}

// Whether class c ranks ahead of the label's class (whose score is a number): a higher score, an
// equal one at a lower index, or a NaN.
template <typename T>
bool ranks_ahead(T score, int64_t c, T label_score, int64_t label) {
  return std::isnan(score) || score > label_score || (score == label_score && c < label);
}

template <typename T>
void count_samples(const TensorView& pred, const TensorView& target, int64_t k, double* counts) {
  const int64_t batch = pred.shape()[0], classes = pred.shape()[1];
  const T* scores = pred.as<const T>();
  const int32_t* labels = target.as<const int32_t>();
  for (int64_t i = 0; i < batch; ++i) {
    const T* s = scores + i * classes;
    const int64_t label = labels[i];
    // A label outside [0, classes) or a NaN at the label is never right.
    int64_t ahead = k;
    if (label >= 0 && label < classes && !std::isnan(s[label])) {
      ahead = 0;
      for (int64_t c = 0; c < classes && ahead < k; ++c)
        if (c != label && ranks_ahead(s[c], c, s[label], label)) ++ahead;
    }
    counts[2 * i] = ahead < k ? 1 : 0;
    counts[2 * i + 1] = 1;
  }
}

void add_sums(const double* counts, int64_t samples, int64_t per_sample, double* sums) {
  for (int64_t i = 0; i < samples; ++i) {
    sums[0] += counts[i * per_sample];
    sums[1] += counts[i * per_sample + 1];
  }
}

Metric make_top_k_metric(int64_t k) {
  const std::string n = std::to_string(k);
  auto check = [k](const TensorDesc& p, const TensorDesc& t) {
    return check_classification(p, t, k);
  };
  auto count = [k](const TensorView& pred, const TensorView& target, double* counts) {
    if (const std::string problem = check_classification(pred.desc(), target.desc(), k);
        !problem.empty())
      throw_input("metric top" + std::to_string(k) + "_accuracy: " + problem);
    if (pred.dtype() == DType::f64) return count_samples<double>(pred, target, k, counts);
    count_samples<float>(pred, target, k, counts);
  };
  return {"top" + n + "_accuracy",
          "top" + n,
          "top-" + n + " accuracy",
          false,
          2,
          check,
          [](const TensorDesc&) -> int64_t { return 2; },
          count,
          add_sums,
          [](const double* sums) { return sums[1] > 0 ? sums[0] / sums[1] : 0; }};
}

}  // namespace

CREST_REGISTER_METRIC(top1_accuracy, make_top_k_metric(1));
CREST_REGISTER_METRIC(top5_accuracy, make_top_k_metric(5));

}  // namespace crest
