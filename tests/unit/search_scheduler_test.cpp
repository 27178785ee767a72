// The search scheduler (crest/search/scheduler.hpp) driven without training: groups simulated as
// events in time, a planted objective where parameter `a` alone decides quality.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <queue>
#include <set>
#include <sstream>

#include "crest/core/hash_rng.hpp"
#include "crest/search/pbt.hpp"
#include "crest/search/scheduler.hpp"
#include "crest/search/search_space.hpp"

namespace crest {
namespace {

// Parameter `a` of trial i: a planted value (a permutation of 0..n-1, so exactly one trial has
// the best), and the metric after `epoch` epochs: a + 1/epoch (learning curves never cross).
double planted_a(int trial, int n) { return static_cast<double>((trial * 7 + 3) % n); }
double objective(double a, int epoch) { return a + 1.0 / epoch; }

struct Simulated {
  std::vector<TrialRecord> trials;
  std::vector<std::pair<int, int>> promotions;
  std::optional<int> best;
  int max_waiting_groups = 0;  // groups told to wait while new trials were still to start
};

// `groups` groups; each epoch takes 1 + group/10 time units (groups run at different speeds, so
// reports arrive out of step, as in a real study).
Simulated simulate(SchedulerSettings s, int groups) {
  const int n = s.trials;
  Scheduler sched(s, [n](int i) {
    return Assignment{{"a", std::to_string(static_cast<int>(planted_a(i, n)))}};
  });
  using Event = std::tuple<double, int>;  // (time the group is free, group)
  std::priority_queue<Event, std::vector<Event>, std::greater<>> free;
  for (int g = 0; g < groups; ++g) free.emplace(0.0, g);
  Simulated out;
  while (!free.empty()) {
    auto [t, g] = free.top();
    free.pop();
    const Work w = sched.next(g);
    if (w.kind == Work::Kind::done) continue;
    if (w.kind == Work::Kind::wait) {
      if (sched.started() < s.trials) ++out.max_waiting_groups;
      free.emplace(t + 0.5, g);
      continue;
    }
    const double a = std::stod(value_of(w.params, "a"));
    const int from =
        w.resume ? static_cast<int>(sched.trials()[static_cast<size_t>(w.trial)].metric.size()) : 0;
    for (int e = from + 1; e <= w.epochs; ++e) sched.epoch_done(w.trial, e, objective(a, e));
    sched.run_ended(w.trial, false);
    free.emplace(t + (w.epochs - from) * (1 + g / 10.0), g);
  }
  out.trials = sched.trials();
  out.promotions = sched.promotions();
  out.best = sched.best();
  return out;
}

TEST(SearchScheduler, AshaFindsThePlantedBestAndPrunesMostTrialsAtTheFirstRung) {
  SchedulerSettings s;
  s.min_epochs = 1;
  s.max_epochs = 9;
  s.eta = 3;
  s.trials = 27;
  const Simulated r = simulate(s, 4);
  ASSERT_EQ(r.trials.size(), 27u);
  int best_trial = -1;
  for (int i = 0; i < 27; ++i)
    if (planted_a(i, 27) == 0) best_trial = i;
  ASSERT_TRUE(r.best.has_value());
  EXPECT_EQ(*r.best, best_trial);
  int pruned_at_first = 0, completed = 0;
  for (const auto& t : r.trials) {
    EXPECT_NE(t.status, TrialStatus::running);
    EXPECT_NE(t.status, TrialStatus::paused) << "the study ended: paused trials are pruned";
    pruned_at_first += t.status == TrialStatus::pruned && t.metric.size() == 1;
    completed += t.status == TrialStatus::completed;
    if (t.status == TrialStatus::completed) {
      EXPECT_EQ(t.metric.size(), 9u);
    }
  }
  // ASHA keeps about 1/eta per rung: 27 -> 9 -> 3 (more while early rungs are sparse).
  EXPECT_GE(pruned_at_first, 14) << "most trials stop after the first rung";
  EXPECT_GE(completed, 1);
  EXPECT_LE(completed, 6);
  EXPECT_EQ(r.max_waiting_groups, 0) << "a group waited while new trials were still to start";
}

TEST(SearchScheduler, APromotedTrialWasInTheTopThirdOfItsRungWhenPromoted) {
  SchedulerSettings s;
  s.min_epochs = 1;
  s.max_epochs = 3;
  s.eta = 3;
  s.trials = 9;
  const Simulated r = simulate(s, 1);
  // One group: trials arrive in order, so each promotion can be checked against the results
  // recorded before it (trial ids below the promoted one's at rung 0... the next rung's arrivals).
  ASSERT_FALSE(r.promotions.empty());
  for (const auto& [trial, rung] : r.promotions) {
    EXPECT_EQ(rung, 1);
    int better = 0, recorded = 0;
    // With one group, the trials started before the promotion are those with a lower id, up to
    // the one that triggered it; a promoted trial beats at least 2/3 of the trials recorded.
    for (int other = 0; other < static_cast<int>(r.trials.size()); ++other) {
      if (r.trials[static_cast<size_t>(other)].metric.empty()) continue;
      ++recorded;
      better += planted_a(other, 9) < planted_a(trial, 9);
    }
    EXPECT_LT(better, recorded);
  }
  // The single best trial is promoted and completes.
  int best_trial = -1;
  for (int i = 0; i < 9; ++i)
    if (planted_a(i, 9) == 0) best_trial = i;
  EXPECT_EQ(r.trials[static_cast<size_t>(best_trial)].status, TrialStatus::completed);
}

TEST(SearchScheduler, RandomTrainsEveryTrialToTheEndAndHigherIsBetterWorks) {
  SchedulerSettings s;
  s.min_epochs = s.max_epochs = 2;
  s.trials = 5;
  s.lower_is_better = false;
  const Simulated r = simulate(s, 2);
  ASSERT_EQ(r.trials.size(), 5u);
  int worst_a_trial = -1;  // with higher-is-better the largest a + 1/2 wins
  for (int i = 0; i < 5; ++i)
    if (planted_a(i, 5) == 4) worst_a_trial = i;
  for (const auto& t : r.trials) {
    EXPECT_EQ(t.status, TrialStatus::completed);
    EXPECT_EQ(t.metric.size(), 2u);
  }
  EXPECT_TRUE(r.promotions.empty());
  EXPECT_EQ(r.best, worst_a_trial);
}

TEST(SearchScheduler, AFailedTrialIsRecordedAndTheGroupGetsTheNextOne) {
  SchedulerSettings s;
  s.min_epochs = s.max_epochs = 1;
  s.trials = 2;
  Scheduler sched(s, [](int i) { return Assignment{{"a", std::to_string(i)}}; });
  const Work w0 = sched.next(0);
  sched.run_failed(w0.trial, "loss is NaN");
  const Work w1 = sched.next(0);
  EXPECT_EQ(w1.kind, Work::Kind::run);
  EXPECT_EQ(w1.trial, 1);
  sched.epoch_done(1, 1, 0.5);
  sched.run_ended(1, false);
  EXPECT_EQ(sched.next(0).kind, Work::Kind::done);
  EXPECT_EQ(sched.trials()[0].status, TrialStatus::failed);
  EXPECT_EQ(sched.trials()[0].message, "loss is NaN");
  EXPECT_EQ(sched.best(), 1);
}

// ASHA with `groups` groups whose every run takes a random time (from `timing_seed`); a run's
// reports reach the scheduler when it ends, so they arrive in another order for every timing.
// The curves cross (trial i's metric after e epochs: its planted a plus (i % 5) / e), trial 4
// fails in its first run and trial 9 stops on its own (a quality target) after 2 epochs.
// Returns what must not depend on the timing: every rung's entrants in order, each trial's
// status and epochs, the best trial.
std::string asha_decisions(int groups, uint64_t timing_seed) {
  SchedulerSettings s;
  s.min_epochs = 1;
  s.max_epochs = 9;
  s.eta = 3;
  s.trials = 30;
  const int n = s.trials;
  Scheduler sched(s, [n](int i) {
    return Assignment{{"a", std::to_string(static_cast<int>(planted_a(i, n)))}};
  });
  // (time the group is free, group, the run it was training: -1 none).
  using Event = std::tuple<double, int, int>;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> free;
  for (int g = 0; g < groups; ++g) free.emplace(0.0, g, -1);
  std::map<int, Work> runs;  // per group: its run
  uint64_t draws = 0;
  const auto random_time = [&] {
    return 0.1 + static_cast<double>(rng::counter_bits(timing_seed, draws++) % 1000) / 100.0;
  };
  while (!free.empty()) {
    auto [t, g, trial] = free.top();
    free.pop();
    if (trial >= 0) {  // the group's run ends: its reports arrive now
      const Work& w = runs[g];
      const double a = std::stod(value_of(w.params, "a"));
      const int from = static_cast<int>(sched.trials()[static_cast<size_t>(trial)].metric.size());
      const int to = trial == 9 ? std::min(w.epochs, 2) : w.epochs;
      if (trial == 4) {
        sched.run_failed(trial, "out of memory");
      } else {
        for (int e = from + 1; e <= to; ++e)
          sched.epoch_done(trial, e, a + (trial % 5) / static_cast<double>(e));
        sched.run_ended(trial, to < w.epochs);
      }
    }
    const Work w = sched.next(g);
    if (w.kind == Work::Kind::done) continue;
    if (w.kind == Work::Kind::wait) {
      free.emplace(t + random_time(), g, -1);
      continue;
    }
    runs[g] = w;
    const int from = static_cast<int>(sched.trials()[static_cast<size_t>(w.trial)].metric.size());
    free.emplace(t + random_time() * (w.epochs - from), g, w.trial);
  }
  std::ostringstream o;
  for (const auto& rung : sched.state().entrants) {
    o << "rung:";
    for (int t : rung) o << " " << t;
    o << "\n";
  }
  for (const auto& t : sched.trials())
    o << "trial " << t.id << " " << status_name(t.status) << " " << t.metric.size() << "\n";
  o << "best " << sched.best().value_or(-1) << "\n";
  return o.str();
}

TEST(SearchScheduler, AshaDecisionsDependOnTheMetricsAloneNotOnTheGroupsSpeedsOrCount) {
  const std::string one_group = asha_decisions(1, 1);
  // Some trials were promoted past the first rung and some pruned: the comparison has content.
  EXPECT_NE(one_group.find("completed 9"), std::string::npos) << one_group;
  EXPECT_NE(one_group.find("pruned 1"), std::string::npos) << one_group;
  EXPECT_NE(one_group.find("trial 4 failed 0"), std::string::npos) << one_group;
  EXPECT_NE(one_group.find("trial 9 completed 2"), std::string::npos) << one_group;
  for (int groups : {2, 3, 5, 8})
    for (uint64_t timing : {2, 3, 4}) {
      SCOPED_TRACE(std::to_string(groups) + " groups, timing " + std::to_string(timing));
      EXPECT_EQ(asha_decisions(groups, timing), one_group);
    }
}

// PBT on `speeds.size()` groups (a group's epoch takes speeds[g] time units); the metric after
// each epoch is the member's `a` (planted per trial; a copy takes the donor's) plus 1/epoch.
std::vector<std::pair<int, int>> simulate_pbt(const std::vector<double>& speeds,
                                              std::vector<TrialRecord>* trials = nullptr) {
  SchedulerSettings s;
  s.max_epochs = 4;
  s.trials = static_cast<int>(speeds.size());
  const int n = s.trials;
  Scheduler sched(s, [n](int i) {
    return Assignment{{"a", std::to_string(static_cast<int>(planted_a(i, n)))}};
  });
  PbtSettings pbt;
  pbt.interval = 1;
  pbt.quantile = 0.25;
  sched.enable_pbt(pbt, n, 9, [](const Assignment& a, uint64_t) { return a; });
  using Event = std::tuple<double, int>;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> free;
  for (int g = 0; g < n; ++g) free.emplace(0.0, g);
  while (!free.empty()) {
    auto [t, g] = free.top();
    free.pop();
    const Work w = sched.next(g);
    if (w.kind == Work::Kind::done) continue;
    if (w.kind == Work::Kind::wait) {
      free.emplace(t + 0.25, g);
      continue;
    }
    if (w.copy_from >= 0) sched.copy_done(w.trial, w.copy_from, w.copy_epoch);
    const double a = std::stod(value_of(w.params, "a"));
    const int from = static_cast<int>(sched.trials()[static_cast<size_t>(w.trial)].metric.size());
    for (int e = from + 1; e <= w.epochs; ++e) sched.epoch_done(w.trial, e, objective(a, e));
    sched.run_ended(w.trial, false);
    free.emplace(t + (w.epochs - from) * speeds[static_cast<size_t>(g)], g);
  }
  if (trials) *trials = sched.trials();
  return sched.state().exploits;
}

TEST(SearchScheduler, PbtTheWorstMemberCopiesTheBestAndDecisionsDoNotDependOnSpeeds) {
  std::vector<TrialRecord> trials;
  const auto exploits = simulate_pbt({1, 1, 1, 1}, &trials);
  // 4 members, quantile 1/4: at each of the 3 decisions (after epochs 1, 2, 3) the worst member
  // copies the best. The planted a of 4 trials: trial 0 -> 3, 1 -> 2, 2 -> 1, 3 -> 0.
  ASSERT_EQ(exploits.size(), 3u);
  EXPECT_EQ(exploits[0], (std::pair<int, int>{0, 3}));
  for (const auto& t : trials) {
    EXPECT_EQ(t.status, TrialStatus::completed);
    EXPECT_EQ(t.metric.size(), 4u);
  }
  // After copying, trial 0 carries the best member's hyperparameters (the identity perturbation).
  EXPECT_EQ(value_of(trials[0].params, "a"), "0");
  // Groups of other speeds reach the same decisions: they are made per generation.
  EXPECT_EQ(simulate_pbt({1, 3, 0.5, 2}), exploits);
  EXPECT_EQ(simulate_pbt({4, 1, 1, 0.2}), exploits);
}

TEST(SearchScheduler, PbtPerturbationStaysInRangeAndKeepsConditions) {
  const SearchSpace s = parse_search_space(
      "parameters:\n"
      "  lr_schedule.base_lr: {loguniform: [1e-3, 1e-1]}\n"
      "  data.batch_size: {randint: [2, 8]}\n"
      "  optimizer.name: {choice: [SGD, LARS]}\n"
      "  optimizer.trust_coefficient: {choice: [0.001, 0.01], when: {optimizer.name: LARS}}\n",
      "space.yaml");
  const Assignment donor{{"lr_schedule.base_lr", "0.09"},
                         {"data.batch_size", "2"},
                         {"optimizer.name", "LARS"},
                         {"optimizer.trust_coefficient", "0.001"}};
  PbtSettings pbt;
  pbt.resample = 1;  // list parameters always drawn afresh, unless a condition depends on them
  std::set<std::string> rates;
  for (uint64_t c = 0; c < 32; ++c) {
    const Assignment a = perturb(s, donor, pbt, 1, c);
    ASSERT_EQ(a.size(), 4u);
    const double lr = std::stod(value_of(a, "lr_schedule.base_lr"));
    EXPECT_TRUE(std::abs(lr - 0.072) < 1e-12 || lr == 0.1) << lr;  // x0.8, or x1.2 capped
    rates.insert(value_of(a, "lr_schedule.base_lr"));
    const int batch = std::stoi(value_of(a, "data.batch_size"));
    EXPECT_TRUE(batch == 2 || batch == 3) << batch;  // moves by at least one, stays >= 2
    EXPECT_EQ(value_of(a, "optimizer.name"), "LARS") << "a condition's key is never resampled";
  }
  EXPECT_EQ(rates.size(), 2u);
  EXPECT_EQ(perturb(s, donor, pbt, 1, 5), perturb(s, donor, pbt, 1, 5));
}

// A trial that reached its quality target after 3 epochs and stopped is completed: it beats a
// worse trial trained for all 6 (found in a random study on the learnable CosmoFlow fixture,
// where best.yaml named the only trial that never reached the target).
TEST(SearchScheduler, ATrialStoppedEarlyAtItsTargetRanksWithThoseTrainedToTheEnd) {
  SchedulerSettings s;
  s.min_epochs = s.max_epochs = 6;
  s.trials = 2;
  Scheduler sched(s, [](int i) { return Assignment{{"a", std::to_string(i)}}; });
  const Work first = sched.next(0);
  for (int e = 1; e <= 3; ++e) sched.epoch_done(first.trial, e, 0.5 - 0.1 * e);  // 0.2 at 3
  sched.run_ended(first.trial, /*stopped_early=*/true);
  const Work second = sched.next(0);
  for (int e = 1; e <= 6; ++e) sched.epoch_done(second.trial, e, 0.6 - 0.01 * e);  // 0.54 at 6
  sched.run_ended(second.trial, false);
  ASSERT_TRUE(sched.best().has_value());
  EXPECT_EQ(*sched.best(), first.trial);
  EXPECT_DOUBLE_EQ(sched.best_metric(), 0.5 - 0.1 * 3);
}

}  // namespace
}  // namespace crest
