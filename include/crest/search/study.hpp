// A hyperparameter study: `crest search` (docs/search.md). The job's ranks are split into groups
// of `ranks_per_trial`; each group trains one trial at a time with the normal training loop, in
// its own run directory out/trials/<id>/; world rank 0 runs the scheduler, which the group
// leaders ask for work and tell each epoch's metric.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "crest/dist/communicator.hpp"

namespace crest {

enum class SearchAlgorithm { random, grid, asha, pbt };

struct StudyOptions {
  std::string base_config;             // the config every trial starts from
  std::vector<std::string> overrides;  // applied to the base before each trial's parameters
  std::string space;                   // the search-space file
  std::string out_dir;
  int ranks_per_trial = 1;
  SearchAlgorithm algorithm = SearchAlgorithm::random;
  int trials =
      0;  // trials started; 0: random 10, grid every combination, asha 27, pbt one per group
  uint64_t seed = 0;
  std::string metric;  // a validation metric's short name (val_mae); "": the task's quality one
  // ASHA's rungs (space file `asha:` keys min_epochs, max_epochs, eta; these win when > 0).
  int min_epochs = 0, max_epochs = 0, eta = 0;
  // Continue the study in out_dir (crest search --resume DIR; the options come from its
  // study.json): finished trials kept, interrupted ones resumed from their newest checkpoint.
  bool resume = false;
};

struct StudySummary {
  int trials = 0, completed = 0, pruned = 0, failed = 0;
  int best_trial = -1;  // -1: none finished with a metric
  double best_metric = 0;
  // A stop signal or the time budget stopped this rank's run (its reason): the study is
  // resumable with --resume.
  std::string preempted;
};

// The options of the study in `dir` (its study.json, written when it started), with resume set.
// Throws crest::Error (input) naming the file when `dir` holds no study.
StudyOptions read_study_options(const std::string& dir);

// Runs the study on `world`: every rank calls it. Throws crest::Error (usage or input, exit 2)
// before any training for a bad space, algorithm or rank split. Progress goes to `log` (world
// rank 0).
StudySummary run_study(const StudyOptions& options, Communicator& world, std::ostream& log);

}  // namespace crest
