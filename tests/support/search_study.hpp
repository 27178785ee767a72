// Helpers of the `crest search` tests: space files, the study's rows, trial checkpoints.
#pragma once
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/cli_util.hpp"

namespace crest::test {

inline std::string write_space(const TempDir& d, const std::string& yaml) {
  const std::string path = d.file("space.yaml");
  std::ofstream(path) << yaml;
  return path;
}

// Every line of out/trials.jsonl.
inline std::vector<nlohmann::json> study_rows(const std::string& out) {
  std::vector<nlohmann::json> rows;
  std::ifstream in(out + "/trials.jsonl");
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

// The rows with a final status (completed, pruned, failed), one per trial.
inline std::vector<nlohmann::json> final_rows(const std::string& out) {
  std::vector<nlohmann::json> rows;
  for (auto& r : study_rows(out))
    if (r["status"] != "running") rows.push_back(r);
  return rows;
}

// The newest checkpoint of a run directory ("" when none).
inline std::string newest_checkpoint(const std::string& run_dir) {
  std::string newest;
  if (!std::filesystem::exists(run_dir + "/checkpoints")) return newest;
  for (const auto& e : std::filesystem::directory_iterator(run_dir + "/checkpoints")) {
    const std::string p = e.path().string();
    if (p.ends_with(".safetensors") && p > newest) newest = p;
  }
  return newest;
}

}  // namespace crest::test
