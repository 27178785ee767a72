// The scheduler of `crest search`: which trial a group trains next and how far, and which trials
// go on (docs/search.md). Pure logic, no training and no communication: the study feeds it the
// groups' requests and reports in the order they arrive, and tests drive it with a fake
// objective.
//
// Random and grid studies train every trial to the full epoch count. ASHA (asynchronous
// successive halving) trains new trials to the first rung and promotes a trial to the next rung
// when its metric is in the top 1/eta of the results recorded at its rung; a group with nothing
// to promote starts a new trial, so no group waits for a rung to fill. The results of a rung are
// taken in the order trials entered it (trial number at the first rung, promotion order above),
// not in the order they arrive, so the decisions depend on the metrics alone and not on the
// groups' speeds: the same seed gives the same promotions on any number of groups. PBT
// (enable_pbt) keeps one member per group and decides by generations which members copy which.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "crest/search/pbt.hpp"
#include "crest/search/search_space.hpp"

namespace crest {

enum class TrialStatus { running, paused, completed, pruned, failed };
std::string status_name(TrialStatus s);  // "running", ...

// What a group is told to do.
struct Work {
  enum class Kind { run, wait, done } kind = Kind::done;
  int trial = -1;
  Assignment params;
  int epochs = 0;       // train until this epoch (the run's data.n_epochs)
  bool resume = false;  // continue the trial's run directory from its newest checkpoint
  // PBT's exploit: first replace the trial's state by trial `copy_from`'s checkpoint at the end
  // of epoch `copy_epoch`, which group `copy_from_group` holds and sends.
  int copy_from = -1, copy_from_group = -1, copy_epoch = 0;
};

struct TrialRecord {
  int id = 0;
  Assignment params;
  TrialStatus status = TrialStatus::running;
  int group = -1;              // the group that trains (or last trained) it
  int target_epochs = 0;       // what its current or last run trains to
  std::vector<double> metric;  // per epoch (1-based epoch e at e - 1); NaN: not validated
  std::string message;         // why it failed
  // PBT: the copy this member was told to make and has not confirmed (copy_done), to be made
  // again if the study is resumed before it was.
  int copy_from = -1, copy_epoch = 0;
};

struct SchedulerSettings {
  // Rungs: min_epochs, min_epochs * eta, ... up to max_epochs (always the last rung). A random
  // or grid study is one rung: min_epochs == max_epochs.
  int min_epochs = 1, max_epochs = 1;
  int eta = 3;
  int trials = 1;  // trials started in all
  bool lower_is_better = true;
};

// Everything the scheduler has decided and recorded: what a study persists after each decision
// (state.json) and restores on --resume, so the decisions go on as if never interrupted.
struct SchedulerState {
  std::vector<TrialRecord> trials;
  // ASHA, per rung: the trials that entered it, in entry order (trial number at the first rung,
  // promotion order above); how many of them were taken into the decisions (a prefix: the next
  // one is still training towards the rung); the taken ones' (metric, trial), in entry order;
  // and per trial, whether it was promoted from the rung.
  std::vector<std::vector<int>> entrants;
  std::vector<int> taken;
  std::vector<std::vector<std::pair<double, int>>> results;
  std::vector<std::vector<bool>> promoted;
  std::vector<std::pair<int, int>> promotions;  // (trial, rung promoted to), in decision order
  std::vector<std::pair<int, int>> to_resume;   // promotions no group has taken up yet
  bool finished = false;
  // PBT: each group's member (-1: none yet), each trial's copies in flight as a donor, and the
  // exploits decided: (receiver, donor) in decision order.
  std::vector<int> member_of_group;
  std::vector<int> pending_copies;
  std::vector<std::pair<int, int>> exploits;
};

class Scheduler {
 public:
  // `trial_params(i)`: the hyperparameters of the i-th trial started (sample_trial or a grid).
  Scheduler(SchedulerSettings settings, std::function<Assignment(int)> trial_params);

  Work next(int group);
  // A group's run of `trial` finished epoch `epoch` (1-based) with the metric (NaN: none).
  void epoch_done(int trial, int epoch, double metric);
  // The run ended: failed with `message`, or ended before its target epochs on its own (the
  // quality target or early stopping), or reached its target epochs.
  void run_failed(int trial, const std::string& message);
  void run_ended(int trial, bool stopped_early);

  // Population-based training instead of rungs (docs/search.md "PBT"): each of `groups` groups
  // holds one member of the population (settings.trials of them) for the whole study and trains
  // it `pbt.interval` epochs at a time to max_epochs. After each interval, once every live member
  // has reached the same epoch, a member in the bottom quantile copies a top member's state at
  // that epoch and takes its perturbed hyperparameters (`perturb(params, decision number)`); the
  // others go on. Groups that finish wait until the whole population has (they hold donors'
  // checkpoints).
  void enable_pbt(PbtSettings pbt, int groups, uint64_t seed,
                  std::function<Assignment(const Assignment&, uint64_t)> perturb);
  // The receiver of an exploit has `donor`'s state as of the end of epoch `epoch` (1-based).
  void copy_done(int trial, int donor, int epoch);

  // Continues from a saved state. Trials that were running when it was saved (their group was
  // interrupted) are handed out again first, to resume from their newest checkpoint.
  void restore(SchedulerState state);
  const SchedulerState& state() const { return s_; }

  const std::vector<TrialRecord>& trials() const { return s_.trials; }
  const std::vector<int>& rungs() const { return rungs_; }
  // The trial with the best final metric among the completed ones (trained to the end, or
  // stopped early by their own rules, e.g. a quality target), else among those at the highest
  // rung any trial reached; nullopt when none has a metric.
  std::optional<int> best() const;
  // Its metric at its last validated epoch.
  double best_metric() const;
  int started() const { return static_cast<int>(s_.trials.size()); }
  bool finished() const { return s_.finished; }
  const SchedulerSettings& settings() const { return settings_; }
  // Promotions so far: (trial, rung index it was promoted to), in decision order.
  const std::vector<std::pair<int, int>>& promotions() const { return s_.promotions; }

 private:
  int rung_of_epoch(int epoch) const;  // index of the rung ending at `epoch`, or -1
  bool better(double a, double b) const;
  void take_settled_results();
  void promote_top(size_t k);
  std::optional<std::pair<int, int>> promotable();
  void finish();

  SchedulerSettings settings_;
  std::function<Assignment(int)> trial_params_;
  std::vector<int> rungs_;
  Work next_pbt(int group);
  bool population_done() const;

  SchedulerState s_;
  bool pbt_ = false;
  PbtSettings pbt_settings_;
  uint64_t pbt_seed_ = 0;
  std::function<Assignment(const Assignment&, uint64_t)> perturb_;
  std::vector<int> interrupted_;  // restored trials to resume, in id order
};

}  // namespace crest
