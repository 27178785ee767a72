// What a study leaves in its directory (src/search, internal): trials.jsonl, the event log (one
// line per trial per reported epoch, and one per status change), and trials.csv, the results
// table (one row per trial, as Optuna's trials_dataframe() or Ray Tune's results table). Both
// have the same plain-named columns: trial, group, status, epoch, every parameter under its
// config key, the figures (train_loss, val_loss, val_mae, ...), seconds, message.
#pragma once
#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "crest/search/scheduler.hpp"

namespace crest::search_detail {

struct TrialRow {
  int trial = 0;
  int group = -1;
  std::string status;  // running, completed, pruned, failed
  int epoch = 0;       // 0: no epoch finished (a trial that failed before its first)
  Assignment params;
  std::vector<std::pair<std::string, double>> figures;  // train_loss, val_loss, val_<metric>
  double seconds = 0;                                   // the epoch's
  std::string message;
};

class StudyRecords {
 public:
  // `parameter_keys`: the space's keys, in file order (a column each, empty where inactive).
  // `append`: continue the files of an earlier invocation (--resume).
  StudyRecords(std::string dir, std::vector<std::string> parameter_keys, bool append);
  // --resume: the rows an earlier invocation wrote (a last line cut short by a kill is dropped
  // from the file), with each trial's parameters from `params_of` (the exact texts).
  void load_existing(const std::function<Assignment(int)>& params_of);
  // Appends the row to trials.jsonl at once (flushed: a killed study keeps every row written).
  void add(const TrialRow& row);
  // Rewrites trials.csv (atomically): one row per trial that has one, in trial order, with its
  // status now (`status_of`, the scheduler's: a trial ASHA holds at a rung is `paused`), its
  // group, parameters, epoch and figures as of its newest row, `seconds` summed over its epochs,
  // and its newest message.
  void write_csv(const std::function<std::string(int)>& status_of) const;
  const std::vector<TrialRow>& rows() const { return rows_; }

 private:
  std::string dir_;
  std::vector<std::string> keys_;
  std::vector<TrialRow> rows_;
  std::ofstream jsonl_;
};

// A parameter's text as a JSON or CSV value: numbers as numbers, the rest as strings.
bool looks_numeric(const std::string& text);
bool looks_integer(const std::string& text);

}  // namespace crest::search_detail
