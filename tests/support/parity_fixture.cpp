#include "support/parity_fixture.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "support/hashed_init.hpp"
#include "support/test_util.hpp"

namespace crest::test {

std::pair<std::string, std::vector<int64_t>> reference_name(const BuiltModel& m,
                                                            const ParamSlot& s) {
  const auto it = m.external_params.find(s.name);
  if (it == m.external_params.end()) return {s.name, s.shape.to_vector()};
  return {it->second.key, it->second.shape};
}

ValuesByKey values_by_reference_key(const BuiltModel& m, const ParamStore& p) {
  ValuesByKey out;
  for (size_t i = 0; i < p.slots().size(); ++i) {
    const TensorView v = p.value(i);
    std::vector<double>& dst = out[reference_name(m, p.slots()[i]).first];
    for (int64_t k = 0; k < v.numel(); ++k) dst.push_back(element(v, static_cast<size_t>(k)));
  }
  return out;
}

ValuesByKey gradients_by_reference_key(const BuiltModel& m, const ParamStore& p) {
  ValuesByKey g;
  for (size_t i = 0; i < p.slots().size(); ++i) {
    if (!p.slots()[i].spec.trainable) continue;
    const TensorView v = p.grad(i);
    std::vector<double>& dst = g[reference_name(m, p.slots()[i]).first];
    for (int64_t k = 0; k < v.numel(); ++k) dst.push_back(element(v, static_cast<size_t>(k)));
  }
  return g;
}

std::vector<double> relative_errors(const ValuesByKey& got, const ValuesByKey& exact,
                                    std::string* worst_key) {
  std::vector<double> errors;
  double worst = -1;
  for (const auto& [key, want] : exact) {
    const std::vector<double>& mine = got.at(key);
    std::vector<double> d(want.size());
    for (size_t j = 0; j < want.size(); ++j) d[j] = mine[j] - want[j];
    errors.push_back(norm(d) / norm(want));
    if (errors.back() > worst) worst = errors.back(), *worst_key = key;
  }
  std::sort(errors.begin(), errors.end());
  return errors;
}

void set_hashed_initial_values(const BuiltModel& m, ParamStore& p, uint64_t seed) {
  for (size_t i = 0; i < p.slots().size(); ++i) {
    const auto [key, shape] = reference_name(m, p.slots()[i]);
    const TensorView v = p.value(i);
    for (int64_t k = 0; k < v.numel(); ++k) {
      const double x = hashed_init::initial_value(seed, key, shape, static_cast<uint64_t>(k));
      if (v.dtype() == DType::f64)
        v.as<double>()[k] = x;
      else
        v.as<float>()[k] = static_cast<float>(x);
    }
  }
}

std::vector<double> read_f64(const SafetensorsFile& f, const std::string& name) {
  const SafetensorsTensor& t = f.at(name);
  std::vector<double> v(static_cast<size_t>(t.numel()));
  f.read_into(name, DType::f64, t.crest_shape(), v.data());
  return v;
}

std::vector<int64_t> read_i64(const SafetensorsFile& f, const std::string& name) {
  const SafetensorsTensor& t = f.at(name);
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  f.read_into(name, DType::i64, t.crest_shape(), v.data());
  return v;
}

double norm(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return std::sqrt(s);
}

int expect_sampled_outcomes_match(const SafetensorsFile& fixture, const ValuesByKey& initial,
                                  const ValuesByKey& final_values, double relative) {
  int checked = 0;
  for (const auto& [key, values] : final_values) {
    if (key.ends_with("num_batches_tracked")) {
      EXPECT_EQ(values.at(0), read_f64(fixture, key + ":value").at(0)) << key;
      continue;
    }
    const bool trained = fixture.contains(key + ":delta");
    std::vector<double> mine = values;  // a trained parameter's update, else its final value
    if (trained)
      for (size_t i = 0; i < mine.size(); ++i) mine[i] -= initial.at(key)[i];
    const std::vector<double> want = read_f64(fixture, key + (trained ? ":delta" : ":value"));
    const std::vector<int64_t> at = read_i64(fixture, key + ":index");
    // The relative error of the outcome over the sampled elements, and of its norm over all.
    double diff = 0, scale = 0;
    for (size_t j = 0; j < at.size(); ++j) {
      const double d = mine.at(static_cast<size_t>(at[j])) - want[j];
      diff += d * d;
      scale += want[j] * want[j];
    }
    EXPECT_LE(std::sqrt(diff / scale), relative) << key;
    const double want_norm = read_f64(fixture, key + ":norm").at(0);
    EXPECT_NEAR(norm(mine), want_norm, relative * want_norm) << key;
    ++checked;
  }
  return checked;
}

}  // namespace crest::test
