#include "run_layouts.hpp"

#include <filesystem>
#include <system_error>

namespace crest {

std::string layout_record_path(const std::string& run_dir, int rank) {
  if (run_dir.empty()) return "";
  return run_dir + "/layouts.rank" + std::to_string(rank) + ".json";
}

LayoutTuning run_layout_tuning(const Config& config, const std::string& run_dir, int rank,
                               bool resume) {
  LayoutTuning t;
  t.record_file = layout_record_path(run_dir, rank);
  if (resume && !t.record_file.empty()) {
    // The record is the truth about the run being continued, whatever crest.autotune says now.
    std::error_code ec;
    t.reuse_record = std::filesystem::exists(t.record_file, ec);
    t.measure = t.reuse_record;
  } else {
    t.measure = config.crest.autotune;
  }
  return t;
}

std::string describe_layout_tuning(const LayoutTuning& t) {
  if (t.reuse_record) return "layouts: as recorded in " + t.record_file + " (resumed run)";
  if (t.measure)
    return "layouts: measured (crest.autotune), cached per machine" +
           (t.record_file.empty() ? std::string() : ", recorded in " + t.record_file);
  return "";
}

}  // namespace crest
