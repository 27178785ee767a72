// The study's report.html (src/search, internal): metric against epoch per trial, the trials
// ranked, and the scheduler's decisions (ASHA's promotions, PBT's copies), drawn with the run
// report's pieces (crest/train/report_charts.hpp). One self-contained page, no script.
#pragma once
#include <string>
#include <vector>

#include "crest/search/scheduler.hpp"
#include "study_records.hpp"

namespace crest::search_detail {

struct StudyReportInput {
  std::string title;        // the study directory
  std::string description;  // "asha, seed 1, 4 groups of 2 ranks"
  std::string metric;       // "val_mae"
  bool lower_is_better = true;
  std::vector<std::string> keys;  // the parameters, in space order
  const Scheduler* scheduler = nullptr;
  const std::vector<TrialRow>* rows = nullptr;
};

std::string study_report_html(const StudyReportInput& in);
// Writes dir/report.html atomically.
void write_study_report(const std::string& dir, const StudyReportInput& in);

}  // namespace crest::search_detail
