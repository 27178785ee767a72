#include "crest/train/task.hpp"

#include <algorithm>
#include <cstdio>

#include "crest/train/trainer.hpp"

namespace crest {

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
  for (const std::string& name : config.train.metrics)
    t.metrics.push_back(&find_metric(name, "train.metrics"));
  if (config.train.target_mae) {
    const Metric& mae = find_metric("mean_absolute_error", "train.target_mae");
    t.target = QualityTarget{&mae, *config.train.target_mae};
    if (std::find(t.metrics.begin(), t.metrics.end(), &mae) == t.metrics.end()) {
      t.metrics.push_back(&mae);  // first: the quality metric leads the log line
      std::rotate(t.metrics.begin(), t.metrics.end() - 1, t.metrics.end());
    }
  }
  return t;
}

}  // namespace crest
