// The plan of a study (study_plan.hpp).
#include "study_plan.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>

#include "crest/core/error.hpp"
#include "crest/search/space_check.hpp"
#include "crest/train/config.hpp"
#include "crest/train/metric.hpp"
#include "crest/train/task.hpp"

namespace crest::search_detail {
namespace {

// asha: {min_epochs: r, max_epochs: R, eta: e} in the space file; options given win.
void read_asha_section(const SearchSpace& space, const YAML::Node& n, StudyOptions& o) {
  for (const auto& kv : n) {
    const std::string key = kv.first.as<std::string>();
    int v = 0;
    if (!YAML::convert<int>::decode(kv.second, v))
      throw_input(space.source + ": asha." + key + ": expected an integer");
    if (key == "min_epochs" && o.min_epochs == 0)
      o.min_epochs = v;
    else if (key == "max_epochs" && o.max_epochs == 0)
      o.max_epochs = v;
    else if (key == "eta" && o.eta == 0)
      o.eta = v;
    else if (key != "min_epochs" && key != "max_epochs" && key != "eta")
      throw_input(space.source + ": asha." + key + ": unknown key (min_epochs, max_epochs, eta)");
  }
}

// pbt: {interval: T, quantile: q, resample: p}.
PbtSettings read_pbt_section(const SearchSpace& space, const YAML::Node& n) {
  PbtSettings p;
  for (const auto& kv : n) {
    const std::string key = kv.first.as<std::string>();
    const std::string at = space.source + ": pbt." + key;
    double v = 0;
    if (!YAML::convert<double>::decode(kv.second, v)) throw_input(at + ": expected a number");
    if (key == "interval" && (v < 1 || v != std::floor(v)))
      throw_input(at + ": expected whole epochs >= 1");
    if ((key == "quantile" && !(v > 0 && v <= 0.5)) || (key == "resample" && !(v >= 0 && v <= 1)))
      throw_input(at + ": out of range (quantile in (0, 0.5], resample in [0, 1])");
    if (key == "interval")
      p.interval = static_cast<int>(v);
    else if (key == "quantile")
      p.quantile = v;
    else if (key == "resample")
      p.resample = v;
    else
      throw_input(at + ": unknown key (interval, quantile, resample)");
  }
  return p;
}

void read_sections(const SearchSpace& space, StudyOptions& o, PbtSettings& pbt) {
  for (const auto& [name, text] : space.sections) {
    const YAML::Node n = YAML::Load(text);
    if (name != "asha" && name != "pbt")
      throw_input(space.source + ": unknown section '" + name + "' (known: parameters, asha, pbt)");
    if (!n.IsMap()) throw_input(space.source + ": " + name + ": expects key: value pairs");
    if (name == "asha")
      read_asha_section(space, n, o);
    else
      pbt = read_pbt_section(space, n);
  }
}

// The figure optimised and its direction: --metric, else the task's quality metric.
void choose_metric(const StudyOptions& o, const Config& base, StudyPlan& plan) {
  if (o.metric == "val_loss" || o.metric == "train_loss") {
    plan.trial.metric = o.metric;
    plan.settings.lower_is_better = true;
    return;
  }
  const Metric* m = nullptr;
  if (!o.metric.empty()) {
    const std::string name = o.metric.rfind("val_", 0) == 0 ? o.metric.substr(4) : o.metric;
    m = metric_named(name);
    if (!m)
      throw_usage("--metric " + o.metric +
                  ": not a metric (val_loss, train_loss, or one of train.metrics)");
    const Task task = make_task(base);
    if (std::find(task.metrics.begin(), task.metrics.end(), m) == task.metrics.end())
      throw_usage("--metric " + o.metric +
                  ": the runs do not measure it (add it to train.metrics)");
  } else {
    const Task task = make_task(base);
    m = task.quality_metric();
    if (!m) {
      plan.trial.metric = "val_loss";
      plan.settings.lower_is_better = true;
      return;
    }
  }
  plan.trial.metric = "val_" + m->short_name;
  plan.settings.lower_is_better = m->lower_is_better;
}

// PBT's population is one trial per group, each held by its group the whole study (its leader
// serves the trial's checkpoints to the others), and a copy must be resumable with the new
// hyperparameters.
void check_pbt(const StudyPlan& plan, const StudyOptions& o) {
  if (plan.groups < 2)
    throw_usage(
        "pbt needs at least 2 groups (members copy each other's state): run under mpirun "
        "with more ranks than --ranks-per-trial");
  if (o.trials > 0 && o.trials != plan.groups)
    throw_usage("pbt trains one trial per group: --trials " + std::to_string(o.trials) +
                " differs from the " + std::to_string(plan.groups) + " groups");
  if (const std::string key = pbt_refused_key(plan.space); !key.empty())
    throw_usage(plan.space.source + ": parameters." + key +
                ": pbt cannot change it (a copied checkpoint holds the donor's model and "
                "optimizer; resume refuses another)");
}

}  // namespace

StudyPlan plan_study(StudyOptions o, int world_size) {
  StudyPlan plan;
  if (o.ranks_per_trial < 1) throw_usage("--ranks-per-trial must be >= 1");
  if (world_size % o.ranks_per_trial != 0)
    throw_usage("--ranks-per-trial " + std::to_string(o.ranks_per_trial) + " does not divide the " +
                std::to_string(world_size) + " ranks of the job into equal groups");
  plan.groups = world_size / o.ranks_per_trial;
  plan.space = load_search_space(o.space);
  const Config base = load_config(o.base_config, o.overrides);
  check_space_against_config(plan.space, o.base_config, o.overrides);
  read_sections(plan.space, o, plan.pbt);
  plan.trial = {o.base_config, o.overrides, o.out_dir, "", 0};
  plan.base_threads = base.crest.threads;
  choose_metric(o, base, plan);
  SchedulerSettings& s = plan.settings;
  s.max_epochs = base.data.n_epochs;
  s.min_epochs = base.data.n_epochs;
  s.eta = 3;
  if (o.algorithm == SearchAlgorithm::asha) {
    s.max_epochs = o.max_epochs > 0 ? o.max_epochs : base.data.n_epochs;
    s.min_epochs = o.min_epochs > 0 ? o.min_epochs : 1;
    s.eta = o.eta > 0 ? o.eta : 3;
    if (s.eta < 2) throw_usage("asha eta must be >= 2 (the reduction factor)");
    if (s.min_epochs > s.max_epochs)
      throw_usage("asha min_epochs " + std::to_string(s.min_epochs) + " > max_epochs " +
                  std::to_string(s.max_epochs));
  }
  if (o.trials < 0) throw_usage("--trials must be >= 0");
  if (o.algorithm == SearchAlgorithm::grid) {
    plan.grid = grid_trials(plan.space);
    s.trials = o.trials > 0 ? std::min<int>(o.trials, static_cast<int>(plan.grid.size()))
                            : static_cast<int>(plan.grid.size());
  } else if (o.algorithm == SearchAlgorithm::pbt) {
    check_pbt(plan, o);
    s.trials = plan.groups;
    // A donor goes on training while its receiver asks for its checkpoint of the generation's
    // epoch, at most one interval on: that checkpoint must not have been rotated away.
    const int keep = std::max(base.train.checkpoint_keep, plan.pbt.interval + 2);
    plan.trial.overrides.push_back("train.checkpoint_keep=" + std::to_string(keep));
  } else {
    s.trials = o.trials > 0 ? o.trials : o.algorithm == SearchAlgorithm::asha ? 27 : 10;
  }
  return plan;
}

}  // namespace crest::search_detail
