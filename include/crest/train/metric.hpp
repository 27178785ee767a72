// Validation metrics: how a prediction is scored against its target. A metric keeps running
// sums over a validation pass (so the figure is exact when the sums are added over batches and
// ranks) and turns them into its value at the end.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "crest/core/tensor.hpp"

namespace crest {

struct Metric {
  std::string name;        // canonical Keras name, as configs write it: "mean_absolute_error"
  std::string short_name;  // in logs and records: "val_mae", TensorBoard "validation/mae"
  std::string title;       // for people: "mean absolute error"
  bool lower_is_better = true;
  int sums = 1;  // running sums it keeps
  // Adds one batch: `pred` and `target` are host memory of the same element count and dtype.
  std::function<void(const TensorView& pred, const TensorView& target, double* sums)> accumulate;
  std::function<double(const double* sums)> value;
};

// A metric by its canonical or short name in any spelling Keras accepts (case, '_' and '-'
// ignored: MeanAbsoluteError, mae); null when there is none.
const Metric* metric_named(const std::string& spelling);
// The same; throws crest::Error (input) naming `key` and the known metrics when there is none.
const Metric& find_metric(const std::string& name, const std::string& key);
std::vector<std::string> metric_names();

// A metric's figure for one epoch, as the run records it.
struct MetricValue {
  std::string name;  // Metric::short_name
  double value = 0;
  bool operator==(const MetricValue& o) const = default;
};

}  // namespace crest
