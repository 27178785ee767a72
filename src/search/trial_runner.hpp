// One trial's run on its group (src/search, internal): the base config with the trial's
// parameters, in out/trials/<id>/, trained by run_training on the group's communicator; the
// group leader's observer reports each epoch.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "crest/dist/communicator.hpp"
#include "crest/search/scheduler.hpp"
#include "crest/train/config.hpp"

namespace crest::search_detail {

struct TrialSetup {
  std::string base_config;
  std::vector<std::string> overrides;  // the study's, before the trial's parameters
  std::string out_dir;
  std::string metric;  // the figure reported as the trial's metric ("val_mae")
  // crest.threads for this rank's runs when the base config leaves it to crest (0): the node's
  // cores over the job's ranks on the node, not over the group's (several groups share a node).
  int threads = 0;
};

std::string trial_dir(const std::string& out_dir, int trial);  // out/trials/<id>

// The trial's config: base, study overrides, parameters, its run directory and epochs.
Config trial_config(const TrialSetup& setup, const Assignment& params, int trial, int epochs);

struct TrialOutcome {
  bool ok = true;
  bool stopped_early = false;  // ended before its epochs on its own (quality target, patience)
  bool preempted = false;      // a stop signal or the time budget ended it (message: why)
  std::string message;         // why it failed
};

// Trains `work` on `group` (every rank of the group calls it). `report` gets each epoch's
// "epoch" message (messages.hpp) on the group's rank 0. Never throws for the trial's own
// failures (a config error, a non-finite loss): they come back as the outcome.
// A PBT exploit (work.copy_from >= 0) first has the leader `fetch` the donor's checkpoint
// (checkpoint_transfer.hpp), install it, and report a "copied" message.
struct FetchedCheckpoint;
TrialOutcome run_trial(const TrialSetup& setup, const Work& work, int group_index,
                       Communicator& group,
                       const std::function<void(const nlohmann::json&)>& report,
                       const std::function<FetchedCheckpoint(const Work&)>& fetch);

}  // namespace crest::search_detail
