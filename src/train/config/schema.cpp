#include "config/schema.hpp"

#include <algorithm>

#include "config/sections.hpp"
#include "crest/graph/graph_yaml.hpp"
#include "crest/models/model_registry.hpp"

namespace crest::config {
namespace {

std::vector<std::string> model_keys_any() {
  std::vector<std::string> keys{"name"};
  for (const char* k : {"inputs", "layers", "outputs", "loss"}) keys.emplace_back(k);
  for (const auto& name : model_names())
    for (const auto& k : find_model_kind(name).keys)
      if (std::find(keys.begin(), keys.end(), k.key) == keys.end()) keys.push_back(k.key);
  return keys;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

const Schema& schema() {
  static const Schema s = {
      {"",
       {"output_dir", "mlperf", "data", "model", "optimizer", "lr_schedule", "train", "crest",
        "dist"}},
      {"mlperf", mlperf_table().keys()},
      {"data", data_table().keys()},
      {"model", model_keys_any()},
      {"optimizer", optimizer_table().keys()},
      {"lr_schedule", lr_schedule_table().keys()},
      {"train", train_table().keys()},
      {"crest", runtime_table().keys()},
      {"dist", dist_table().keys()},
      // A map of its own keys, so an override may set one of them (dist.pipeline.stages=2).
      {"dist.pipeline",
       {"stages", "micro_batches", "schedule", "recompute", "stage_starts", "balance",
        "rebalance"}},
  };
  return s;
}

const std::vector<std::string>* keys_of(const std::string& section) {
  for (const auto& [name, keys] : schema())
    if (name == section) return &keys;
  return nullptr;
}

bool is_free_map(const std::string& path) { return path == "lr_schedule.decay_schedule"; }

std::string suggestion(const std::string& section, const std::string& key,
                       const std::vector<std::string>& known) {
  std::string best;
  size_t best_d = std::max<size_t>(2, key.size() / 3) + 1;
  for (const auto& k : known) {
    const size_t d = edit_distance(key, k);
    if (d < best_d) best_d = d, best = k;
  }
  if (!best.empty()) return " (did you mean " + join_path(section, best) + "?)";
  // A known key in the wrong section is a common slip (batch_size under model:).
  for (const auto& [other, keys] : schema())
    if (other != section && std::find(keys.begin(), keys.end(), key) != keys.end())
      return " (it belongs in another section: " + join_path(other, key) + ")";
  return " (" + (section.empty() ? std::string("top-level keys") : section + " accepts") + ": " +
         join_list(known) + ")";
}

// In file order, so the first unknown key of the file is the one named.
void check_known_keys(const Source& src, const Section& s, const std::vector<std::string>& known) {
  if (!s.value.IsMap()) return;
  for (auto kv = s.value.begin(); kv != s.value.end(); ++kv) {
    const std::string name = kv->first.Scalar();
    if (std::find(known.begin(), known.end(), name) == known.end())
      src.fail(join_path(s.path, name), kv->first, "unknown key" + suggestion(s.path, name, known));
  }
}

}  // namespace crest::config
