// What a study decides before any training (src/search, internal): the space read and checked
// against the config schema, the rank split, the metric and its direction, the algorithm's
// settings (the space file's asha: and pbt: sections, the options). The same on every rank: every
// rank reads the same files.
#pragma once
#include <string>
#include <vector>

#include "crest/search/pbt.hpp"
#include "crest/search/scheduler.hpp"
#include "crest/search/search_space.hpp"
#include "crest/search/study.hpp"
#include "trial_runner.hpp"

namespace crest::search_detail {

// Everything decided before training, the same on every rank (the same files are read).
struct StudyPlan {
  SearchSpace space;
  SchedulerSettings settings;
  std::vector<Assignment> grid;  // grid studies: every trial's parameters
  TrialSetup trial;
  int groups = 1;
  PbtSettings pbt;
  int base_threads = 0;  // the base config's crest.threads
};

// Throws crest::Error (usage or input) for anything wrong, naming the file and key.
StudyPlan plan_study(StudyOptions o, int world_size);

}  // namespace crest::search_detail
