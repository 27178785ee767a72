// Validation metrics: how a prediction is scored against its target. A metric keeps running
// sums over a validation pass (so the figure is exact when the sums are added over batches and
// ranks) and turns them into its value at the end.
//
// A metric sees the prediction and the target as they come out of the model and the loader:
// host memory, batch first, each with its own shape, dtype and layout. Regression metrics (mae,
// mse) compare element by element; a segmentation metric (iou) reads class scores
// [N, classes, spatial...] (plain or channels-last) against int32 labels [N, spatial...]. Each
// metric says in check() which pairs it can score, so a task that pairs a metric with the wrong
// model fails when the model is compiled, not at the end of the first epoch.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "crest/core/tensor.hpp"

namespace crest {

struct Metric {
  std::string name;        // canonical name, as configs write it: "mean_absolute_error", "iou"
  std::string short_name;  // in logs and records: "val_mae", TensorBoard "validation/mae"
  std::string title;       // for people: "mean absolute error"
  bool lower_is_better = true;
  int sums = 1;  // running sums it keeps
  // "" when the metric can score predictions described by `pred` against targets described by
  // `target` (batch first, host memory), else what is wrong with them.
  std::function<std::string(const TensorDesc& pred, const TensorDesc& target)> check;
  // A batch is scored in two steps, so that the parts of a sample can be scored apart: counts
  // per sample that add up over the parts (a spatially split prediction's blocks, each against
  // its block of the target: the group's sum of the counts is the whole sample's), then those
  // counts folded into the running sums.
  // How many counts one sample has, for predictions described by `pred` (whole or a block).
  std::function<int64_t(const TensorDesc& pred)> counts_per_sample;
  // Writes counts_per_sample() counts for each sample of the batch, sample after sample. Throws
  // crest::Error (input) with check()'s reason when the pair is not one it can score.
  std::function<void(const TensorView& pred, const TensorView& target, double* counts)> count;
  // Adds `samples` samples' counts, `per_sample` each, into the running sums.
  std::function<void(const double* counts, int64_t samples, int64_t per_sample, double* sums)>
      add_counts;
  std::function<double(const double* sums)> value;

  // Adds one batch of whole predictions (every sample of it): count(), then add_counts().
  void accumulate(const TensorView& pred, const TensorView& target, double* running) const;
};

// Adds `metric` to the registry: one CREST_REGISTER_METRIC line in the file that defines it.
bool register_metric(Metric metric);
#define CREST_REGISTER_METRIC(id, ...)                              \
  [[maybe_unused]] static const bool crest_metric_registered_##id = \
      ::crest::register_metric(__VA_ARGS__)

// A metric by its canonical or short name in any spelling Keras accepts (case, '_' and '-'
// ignored: MeanAbsoluteError, mae, IoU); null when there is none.
const Metric* metric_named(const std::string& spelling);
// The same; throws crest::Error (input) naming `key` and the known metrics when there is none.
const Metric& find_metric(const std::string& name, const std::string& key);
std::vector<std::string> metric_names();  // canonical names, sorted

// Throws crest::Error (input) naming `key` (e.g. "train.metrics") when `metric` cannot score
// the model's prediction `pred` against the data's targets `target`.
void check_metric_fits(const Metric& metric, const TensorDesc& pred, const TensorDesc& target,
                       const std::string& key);

// A metric's figure for one epoch, as the run records it.
struct MetricValue {
  std::string name;  // Metric::short_name
  double value = 0;
  bool operator==(const MetricValue& o) const = default;
};

}  // namespace crest
