#include "crest/train/task.hpp"

#include <algorithm>
#include <cstdio>

#include "crest/core/error.hpp"
#include "crest/train/dataset_registry.hpp"
#include "crest/train/trainer.hpp"

namespace crest {
namespace {

// The quality targets a config may set, each on its metric.
struct TargetKey {
  const char* key;
  const char* metric;
  std::optional<double> TrainConfig::*value;
};
constexpr TargetKey kTargetKeys[] = {
    {"train.target_mae", "mean_absolute_error", &TrainConfig::target_mae},
    {"train.target_iou", "iou", &TrainConfig::target_iou},
    {"train.target_top1", "top1_accuracy", &TrainConfig::target_top1},
};

// [C, D, H, W] for the data's channels-last [D, H, W, C].
Shape channels_first(const Shape& s) {
  std::vector<int64_t> d = s.to_vector();
  std::rotate(d.rbegin(), d.rbegin() + 1, d.rend());
  return Shape(d);
}

const GraphInput& input_named(const Graph& g, const std::string& name, const std::string& model) {
  for (const GraphInput& in : g.inputs())
    if (in.name == name) return in;
  throw_input("model " + model + ": has no input '" + name + "' for the data");
}

// A registered model declares its inputs in C++; the data must fit them as it fits a graph's.
void check_model_takes_data(const Task& t, const DataConfig& data) {
  const GraphInput& x = input_named(t.model.graph, t.model.sample_input, t.name);
  const GraphInput& y = input_named(t.model.graph, t.model.target_input, t.name);
  const Shape sample = channels_first(data.model_sample_shape());
  const DatasetType& type = find_dataset_type(data.name);
  const std::string keys =
      "data.sample_shape" + (type.selection_key.empty() ? "" : ", data." + type.selection_key);
  if (x.per_sample != sample || x.integer)
    throw_input("model " + t.name + ": its input '" + x.name + "' takes " + x.per_sample.str() +
                " per sample, the data gives " + sample.str() + " (" + keys + ")");
  const bool labels = type.labels;
  if (y.per_sample != data.target_shape || y.integer != labels)
    throw_input("model " + t.name + ": its input '" + y.name + "' takes " +
                (y.integer ? "int32 " : "float ") + y.per_sample.str() +
                " per sample, the data gives " + (labels ? "int32 labels " : "float targets ") +
                data.target_shape.str() + " (data.target_shape)");
}

}  // namespace

std::string QualityTarget::describe(double v) const {
  char buf[128];
  std::snprintf(buf, sizeof buf, "val_%s %.4f %s %.4g", metric->short_name.c_str(), v,
                metric->lower_is_better ? "<=" : ">=", value);
  return buf;
}

const Metric* Task::quality_metric() const {
  if (target) return target->metric;
  return metrics.empty() ? nullptr : metrics.front();
}

Task make_task(const Config& config) {
  Task t;
  t.name = config.model.name;
  t.model = build_model(config.model);
  check_model_takes_data(t, config.data);
  for (const std::string& name : config.train.metrics)
    t.metrics.push_back(&find_metric(name, "train.metrics"));
  for (const TargetKey& k : kTargetKeys) {
    const std::optional<double>& value = config.train.*(k.value);
    if (!value) continue;
    const Metric& m = find_metric(k.metric, k.key);
    t.target = QualityTarget{&m, *value};
    if (std::find(t.metrics.begin(), t.metrics.end(), &m) == t.metrics.end()) {
      t.metrics.push_back(&m);  // first: the quality metric leads the log line
      std::rotate(t.metrics.begin(), t.metrics.end() - 1, t.metrics.end());
    }
  }
  return t;
}

void check_metrics_fit(const Task& task, const Config& config, const TensorDesc& pred,
                       const TensorDesc& target) {
  for (const Metric* m : task.metrics) {
    std::string key = "train.metrics";
    for (const TargetKey& k : kTargetKeys)
      if (task.target && m == task.target->metric && config.train.*(k.value)) key = k.key;
    check_metric_fits(*m, pred, target, key);
  }
}

}  // namespace crest
