// A reference network's state_dict as a fixture lists it (`key [shape] dtype` per line, written
// by the peer or torchvision scripts) against the entries of a crest weight file, and the moments
// of a parameter's initial values: what the model tests (DeepCAM, ResNet-50) compare.
#pragma once
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <utility>

#include "crest/data/safetensors.hpp"
#include "crest/engine/weights.hpp"
#include "crest/graph/param_store.hpp"
#include "crest/models/built_model.hpp"
#include "support/cli_util.hpp"
#include "support/test_util.hpp"

namespace crest::test {

// key -> "[shape] dtype" of the fixture `relative_path` (from the source tree).
inline std::map<std::string, std::string> state_dict_entries(const std::string& relative_path) {
  std::ifstream f(source_path(relative_path));
  std::map<std::string, std::string> m;
  std::string line;
  while (std::getline(f, line)) {
    const size_t sp = line.find(' ');
    m[line.substr(0, sp)] = line.substr(sp + 1);
  }
  return m;
}

// "[a, b] float32" (int64 for a counter), as the fixtures write an entry.
inline std::string entry_text(const SafetensorsTensor& t) {
  std::string s = "[";
  for (size_t i = 0; i < t.shape.size(); ++i) s += (i ? ", " : "") + std::to_string(t.shape[i]);
  s += "] ";
  s += t.dtype == SafetensorsDType::I64 ? "int64" : "float32";
  return s;
}

// The entries of the weight file crest writes for `params` under the model's external names. The
// file goes into a directory of its own: ctest runs a file's tests as parallel processes, and two
// of them writing one fixed path read each other's files.
inline std::map<std::string, std::string> written_entries(const ParamStore& params,
                                                          const BuiltModel& model,
                                                          const std::string& file_name) {
  const TempDir dir;
  const std::string file = dir.file(file_name);
  save_weights(params, file, {}, model.external_params);
  std::map<std::string, std::string> written;
  const SafetensorsFile f(file);
  for (const auto& t : f.tensors()) written[t.name] = entry_text(t);
  return written;
}

// The slot of parameter `name`.
inline const ParamSlot& slot_named(const ParamStore& p, const std::string& name) {
  for (const auto& s : p.slots())
    if (s.name == name) return s;
  throw std::runtime_error("no parameter " + name);
}

// Mean and standard deviation of one parameter's values.
inline std::pair<double, double> moments(const ParamStore& p, const std::string& name) {
  const TensorView v = p.value(static_cast<size_t>(&slot_named(p, name) - p.slots().data()));
  double s = 0, s2 = 0;
  const auto n = static_cast<double>(v.numel());
  for (int64_t i = 0; i < v.numel(); ++i) {
    const double x = element(v, static_cast<size_t>(i));
    s += x;
    s2 += x * x;
  }
  return {s / n, std::sqrt(s2 / n - (s / n) * (s / n))};
}

}  // namespace crest::test
