#include <cmath>

#include "crest/core/enum_table.hpp"
#include "crest/core/error.hpp"
#include "crest/train/metric.hpp"

namespace crest {
namespace {

// Element i of host memory of any of the dtypes predictions and targets come in.
double value_at(const TensorView& t, size_t i) {
  switch (t.dtype()) {
    case DType::f64:
      return t.as<double>()[i];
    case DType::i32:
      return t.as<int32_t>()[i];
    case DType::f32:
      return t.as<float>()[i];
    default:
      throw_input("metrics read float32, float64 or int32 values, not " + dtype_name(t.dtype()));
  }
}

// Sums f(prediction - target) over the elements; sums[1] counts them.
template <typename F>
void add_elementwise(const TensorView& pred, const TensorView& target, double* sums, F f) {
  const auto n = static_cast<size_t>(target.numel());
  for (size_t i = 0; i < n; ++i) {
    sums[0] += f(value_at(pred, i) - value_at(target, i));
  }
  sums[1] += static_cast<double>(n);
}

double mean_of_sums(const double* sums) { return sums[1] > 0 ? sums[0] / sums[1] : 0; }

std::vector<Metric> make_metrics() {
  std::vector<Metric> m;
  m.push_back({"mean_absolute_error", "mae", "mean absolute error", true, 2,
               [](const TensorView& p, const TensorView& t, double* s) {
                 add_elementwise(p, t, s, [](double d) { return std::abs(d); });
               },
               mean_of_sums});
  m.push_back({"mean_squared_error", "mse", "mean squared error", true, 2,
               [](const TensorView& p, const TensorView& t, double* s) {
                 add_elementwise(p, t, s, [](double d) { return d * d; });
               },
               mean_of_sums});
  return m;
}

const std::vector<Metric>& metrics() {
  static const std::vector<Metric> all = make_metrics();
  return all;
}

}  // namespace

const Metric* metric_named(const std::string& spelling) {
  const std::string folded = fold_spelling(spelling);
  for (const Metric& m : metrics())
    if (fold_spelling(m.name) == folded || fold_spelling(m.short_name) == folded) return &m;
  return nullptr;
}

const Metric& find_metric(const std::string& name, const std::string& key) {
  if (const Metric* m = metric_named(name)) return *m;
  std::string known;
  for (const std::string& n : metric_names()) known += (known.empty() ? "" : ", ") + n;
  throw_input(key + ": unknown metric '" + name + "' (known: " + known + ")");
}

std::vector<std::string> metric_names() {
  std::vector<std::string> names;
  for (const Metric& m : metrics()) names.push_back(m.name);
  return names;
}

}  // namespace crest
