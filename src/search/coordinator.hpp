// The study's coordinator on world rank 0 (src/search, internal): the scheduler, the records it
// writes after each decision, the progress line and best.yaml. Every group's messages come here
// (messages.hpp), one at a time.
#pragma once
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "crest/search/scheduler.hpp"
#include "study_records.hpp"

namespace crest::search_detail {

struct CoordinatorSetup {
  std::string metric;  // the column optimised, "val_mae"
  int groups = 1;
  // The complete config of trial `params` trained for `epochs` epochs, as YAML (best.yaml).
  std::function<std::string(const Assignment& params, int epochs)> config_yaml;
  std::string out_dir;
  std::string description;  // for the report: "asha, seed 1, 4 groups of 2 ranks"
  bool lower_is_better = true;
  std::vector<std::string> keys;  // the space's parameters
};

class Coordinator {
 public:
  Coordinator(CoordinatorSetup setup, Scheduler scheduler, StudyRecords records, std::ostream& log);

  // --resume: the scheduler's saved state and the rows written so far.
  void restore(SchedulerState state);
  // A group's message; the reply for "next", null otherwise. Thread-safe.
  nlohmann::json handle(const nlohmann::json& message);
  // Every group has been told the study is done.
  bool all_groups_done();
  // The job is ending before the study (preempted): stop serving the groups.
  void stop() { stopped_ = true; }
  bool stopped() const { return stopped_; }
  // Writes trials.csv and best.yaml and prints the last progress line.
  void finish();
  const Scheduler& scheduler() const { return scheduler_; }

 private:
  nlohmann::json next(int group);
  void epoch(const nlohmann::json& m);
  void end(const nlohmann::json& m);
  void copied(const nlohmann::json& m);
  void add_status_row(int trial, const std::string& status, const std::string& message);
  void write_best();
  void write_results_table() const;  // trials.csv, each trial with the scheduler's status
  void save_state() const;
  void write_report() const;
  void progress();
  double eta_seconds() const;

  CoordinatorSetup setup_;
  Scheduler scheduler_;
  StudyRecords records_;
  std::ostream& log_;
  std::mutex mu_;
  std::map<int, TrialRow> last_row_;  // per trial: its newest epoch row
  std::vector<bool> told_done_;
  std::atomic<bool> stopped_{false};
  std::pair<int, size_t> best_written_{-1, 0};  // (trial, epochs) of best.yaml
  double epoch_seconds_sum_ = 0;
  int epochs_reported_ = 0;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_progress_ = started_;
};

}  // namespace crest::search_detail
