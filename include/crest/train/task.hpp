// A training task: what is learned and how it is judged. The trainer runs any task the same way.
// CosmoFlow is one: its network fed each batch's samples and targets, the network's own loss
// (MSE), validation MAE, and "stop once val MAE <= train.target_mae" as its quality rule. DeepCAM
// is another: the network fed the climate fields [C, H, W] (channels-last) and their int32
// labels [H, W], its loss the class-weighted softmax cross-entropy, validation IoU, and "stop once
// val IoU >= train.target_iou".
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "crest/models/built_model.hpp"
#include "crest/train/config.hpp"
#include "crest/train/metric.hpp"

namespace crest {

// The quality a run aims for: a validation metric reaching a value, from below for metrics where
// higher is better (IoU), from above for the others (MAE).
struct QualityTarget {
  const Metric* metric = nullptr;
  double value = 0;
  bool reached(double v) const { return metric->lower_is_better ? v <= value : v >= value; }
  // "val_mae 0.1203 <= 0.124", "val_iou 0.8301 >= 0.82"
  std::string describe(double v) const;
};

struct Task {
  std::string name;  // the model's name; MLPerf's submission_benchmark
  BuiltModel model;
  std::vector<const Metric*> metrics;   // validation metrics, in log order
  std::optional<QualityTarget> target;  // none: the run ends after data.n_epochs
  // The metric whose value the records call the run's quality (MLPerf eval_error): the
  // target's, else the first metric; null without metrics.
  const Metric* quality_metric() const;
};

// The task a config describes: its model (build_model), train.metrics, and the quality target
// (train.target_mae on validation MAE, train.target_iou on validation IoU; the target's metric is
// measured even when train.metrics omits it). Throws crest::Error (input) when the model's inputs
// do not take the data's samples and targets, naming the input and the data keys.
Task make_task(const Config& config);

// Throws crest::Error (input) naming train.metrics (or the target's key) when a metric of the
// task cannot score the compiled model's prediction `pred` against the targets `target`
// (e.g. iou on a regression output).
void check_metrics_fit(const Task& task, const Config& config, const TensorDesc& pred,
                       const TensorDesc& target);

}  // namespace crest
