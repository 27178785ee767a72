// The metric registry and the element-wise regression metrics (mae, mse); iou registers itself in
// iou_metric.cpp.
#include <cmath>
#include <vector>

#include "crest/core/enum_table.hpp"
#include "crest/core/error.hpp"
#include "crest/core/name_registry.hpp"
#include "crest/train/metric.hpp"

namespace crest {
namespace {

bool is_number_dtype(DType t) { return t == DType::f32 || t == DType::f64 || t == DType::i32; }

// Element-wise metrics compare the prediction with its target value by value: the same element
// count, numbers of a dtype the host reads. (CosmoFlow's [N, 4] against [N, 4].)
std::string check_elementwise(const TensorDesc& pred, const TensorDesc& target) {
  if (!is_number_dtype(pred.dtype) || !is_number_dtype(target.dtype))
    return "it reads float32, float64 or int32 values, not a " + dtype_name(pred.dtype) +
           " prediction and a " + dtype_name(target.dtype) + " target";
  if (pred.shape.numel() != target.shape.numel())
    return "it compares values one by one, but the prediction " + pred.shape.str() +
           " and the target " + target.shape.str() + " differ in size";
  if (pred.layout == Layout::blocked) return "it cannot read a blocked prediction";
  return "";
}

// Element i of host memory of any of the dtypes predictions and targets come in.
double value_at(const TensorView& t, size_t i) {
  switch (t.dtype()) {
    case DType::f64:
      return t.as<double>()[i];
    case DType::i32:
      return t.as<int32_t>()[i];
    default:
      return t.as<float>()[i];
  }
}

// Per sample: the sum of f(prediction - target) over its elements, and how many there are.
template <typename F>
void count_elementwise(const TensorView& pred, const TensorView& target, double* counts, F f) {
  if (const std::string problem = check_elementwise(pred.desc(), target.desc()); !problem.empty())
    throw_input("metric: " + problem);
  const int64_t samples = pred.shape()[0];
  const size_t per_sample = static_cast<size_t>(target.numel() / samples);
  for (size_t s = 0; s < static_cast<size_t>(samples); ++s) {
    double sum = 0;
    for (size_t i = s * per_sample; i < (s + 1) * per_sample; ++i)
      sum += f(value_at(pred, i) - value_at(target, i));
    counts[2 * s] = sum;
    counts[2 * s + 1] = static_cast<double>(per_sample);
  }
}

// The element-wise metrics' sums are their counts summed over the samples.
void add_sums(const double* counts, int64_t samples, int64_t per_sample, double* sums) {
  for (int64_t s = 0; s < samples; ++s)
    for (int64_t k = 0; k < per_sample; ++k) sums[k] += counts[s * per_sample + k];
}

double mean_of_sums(const double* sums) { return sums[1] > 0 ? sums[0] / sums[1] : 0; }

NameRegistry<Metric>& registry() {
  static NameRegistry<Metric> metrics("metric");  // built during static initialisation
  return metrics;
}

}  // namespace

void Metric::accumulate(const TensorView& pred, const TensorView& target, double* running) const {
  const int64_t samples = pred.shape()[0], per_sample = counts_per_sample(pred.desc());
  std::vector<double> counts(static_cast<size_t>(samples * per_sample));
  count(pred, target, counts.data());
  add_counts(counts.data(), samples, per_sample, running);
}

bool register_metric(Metric metric) {
  const std::string name = metric.name;
  return registry().add(name, std::move(metric));
}

namespace {

Metric make_mae_metric() {
  return {"mean_absolute_error",
          "mae",
          "mean absolute error",
          true,
          2,
          check_elementwise,
          [](const TensorDesc&) -> int64_t { return 2; },
          [](const TensorView& p, const TensorView& t, double* counts) {
            count_elementwise(p, t, counts, [](double d) { return std::abs(d); });
          },
          add_sums,
          mean_of_sums};
}

Metric make_mse_metric() {
  return {"mean_squared_error",
          "mse",
          "mean squared error",
          true,
          2,
          check_elementwise,
          [](const TensorDesc&) -> int64_t { return 2; },
          [](const TensorView& p, const TensorView& t, double* counts) {
            count_elementwise(p, t, counts, [](double d) { return d * d; });
          },
          add_sums,
          mean_of_sums};
}

}  // namespace

CREST_REGISTER_METRIC(mae, make_mae_metric());
CREST_REGISTER_METRIC(mse, make_mse_metric());

const Metric* metric_named(const std::string& spelling) {
  const std::string folded = fold_spelling(spelling);
  for (const std::string& name : metric_names()) {
    const Metric& m = registry().at(name);
    if (fold_spelling(m.name) == folded || fold_spelling(m.short_name) == folded) return &m;
  }
  return nullptr;
}

const Metric& find_metric(const std::string& name, const std::string& key) {
  if (const Metric* m = metric_named(name)) return *m;
  throw_input(key + ": unknown metric '" + name + "' (known: " + join_names(metric_names()) + ")");
}

std::vector<std::string> metric_names() { return registry().names(); }

void check_metric_fits(const Metric& metric, const TensorDesc& pred, const TensorDesc& target,
                       const std::string& key) {
  const std::string problem = metric.check(pred, target);
  if (!problem.empty())
    throw_input(key + ": metric " + metric.name + " cannot score this model's prediction " +
                pred.shape.str() + " (" + dtype_name(pred.dtype) + ") against the data's targets " +
                target.shape.str() + " (" + dtype_name(target.dtype) + "): " + problem);
}

}  // namespace crest
