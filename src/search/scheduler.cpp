// The search scheduler (crest/search/scheduler.hpp): random and grid as one rung, ASHA as many.
#include "crest/search/scheduler.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "crest/core/error.hpp"
#include "crest/core/hash_rng.hpp"

namespace crest {

std::string status_name(TrialStatus s) {
  switch (s) {
    case TrialStatus::running:
      return "running";
    case TrialStatus::paused:
      return "paused";
    case TrialStatus::completed:
      return "completed";
    case TrialStatus::pruned:
      return "pruned";
    case TrialStatus::failed:
      return "failed";
  }
  return "?";
}

Scheduler::Scheduler(SchedulerSettings settings, std::function<Assignment(int)> trial_params)
    : settings_(settings), trial_params_(std::move(trial_params)) {
  CREST_CHECK(settings_.min_epochs >= 1 && settings_.max_epochs >= settings_.min_epochs &&
                  settings_.eta >= 2,
              "scheduler settings");
  for (int64_t e = settings_.min_epochs; e < settings_.max_epochs; e *= settings_.eta)
    rungs_.push_back(static_cast<int>(e));
  rungs_.push_back(settings_.max_epochs);
  s_.entrants.resize(rungs_.size());
  s_.taken.resize(rungs_.size(), 0);
  s_.results.resize(rungs_.size());
  s_.promoted.resize(rungs_.size());
}

int Scheduler::rung_of_epoch(int epoch) const {
  for (size_t k = 0; k < rungs_.size(); ++k)
    if (rungs_[k] == epoch) return static_cast<int>(k);
  return -1;
}

// A NaN (a trial that did not validate, or diverged) ranks below every number.
bool Scheduler::better(double a, double b) const {
  if (std::isnan(b)) return !std::isnan(a);
  if (std::isnan(a)) return false;
  return settings_.lower_is_better ? a < b : a > b;
}

// Takes each rung's results into the decisions in entry order: the next entrant's result is
// taken once it is known (it reported the rung's epoch) or known never to come (the trial failed,
// or ended before the rung on its own), and each one taken may promote. A result that arrived
// while an earlier entrant still trains waits for it, so what was decided at every step is the
// same whatever order the groups' reports came in.
void Scheduler::take_settled_results() {
  for (size_t k = 0; k + 1 < rungs_.size(); ++k) {
    const auto& entrants = s_.entrants[k];
    while (static_cast<size_t>(s_.taken[k]) < entrants.size()) {
      const TrialRecord& r =
          s_.trials[static_cast<size_t>(entrants[static_cast<size_t>(s_.taken[k])])];
      const auto epoch = static_cast<size_t>(rungs_[k]);
      const bool ended = r.status == TrialStatus::failed || r.status == TrialStatus::completed;
      if (r.metric.size() < epoch && !ended) break;
      ++s_.taken[k];
      if (r.metric.size() < epoch) continue;  // it will never reach this rung
      s_.results[k].emplace_back(r.metric[epoch - 1], r.id);
      promote_top(k);
    }
  }
}

// Promotes, best first, the trials in the top 1/eta of the rung's results taken so far that were
// not promoted yet. They enter the next rung in that order, and wait in to_resume for a group.
void Scheduler::promote_top(size_t k) {
  auto ranked = s_.results[k];
  std::stable_sort(ranked.begin(), ranked.end(), [&](const auto& x, const auto& y) {
    if (better(x.first, y.first)) return true;
    if (better(y.first, x.first)) return false;
    return x.second < y.second;
  });
  const size_t top = ranked.size() / static_cast<size_t>(settings_.eta);
  for (size_t i = 0; i < top; ++i) {
    const int t = ranked[i].second;
    if (s_.promoted[k][static_cast<size_t>(t)]) continue;
    s_.promoted[k][static_cast<size_t>(t)] = true;
    s_.promotions.emplace_back(t, static_cast<int>(k) + 1);
    s_.entrants[k + 1].push_back(t);
    s_.to_resume.emplace_back(t, static_cast<int>(k) + 1);
  }
}

// A promotion whose trial has ended its run (paused at the rung), highest rung first as ASHA
// does: finishing a promising trial is worth more than starting one. A promoted trial that
// completed on its own (its quality target) has nothing left to train and is dropped.
std::optional<std::pair<int, int>> Scheduler::promotable() {
  std::erase_if(s_.to_resume, [&](const auto& p) {
    return s_.trials[static_cast<size_t>(p.first)].status == TrialStatus::completed;
  });
  std::optional<size_t> pick;
  for (size_t i = 0; i < s_.to_resume.size(); ++i) {
    const auto [t, rung] = s_.to_resume[i];
    if (s_.trials[static_cast<size_t>(t)].status != TrialStatus::paused) continue;
    if (!pick || rung > s_.to_resume[*pick].second) pick = i;
  }
  if (!pick) return std::nullopt;
  const auto p = s_.to_resume[*pick];
  s_.to_resume.erase(s_.to_resume.begin() + static_cast<std::ptrdiff_t>(*pick));
  return p;
}

void Scheduler::restore(SchedulerState state) {
  CREST_CHECK(state.results.size() == rungs_.size() && state.promoted.size() == rungs_.size() &&
                  state.entrants.size() == rungs_.size() && state.taken.size() == rungs_.size(),
              "the saved scheduler state has other rungs than these settings");
  s_ = std::move(state);
  interrupted_.clear();
  for (const auto& t : s_.trials)
    if (t.status == TrialStatus::running) interrupted_.push_back(t.id);
}

void Scheduler::enable_pbt(PbtSettings pbt, int groups, uint64_t seed,
                           std::function<Assignment(const Assignment&, uint64_t)> perturb) {
  CREST_CHECK(pbt.interval >= 1 && groups >= 1, "pbt settings");
  pbt_ = true;
  pbt_settings_ = pbt;
  pbt_seed_ = seed;
  perturb_ = std::move(perturb);
  s_.member_of_group.assign(static_cast<size_t>(groups), -1);
}

bool Scheduler::population_done() const {
  if (started() < settings_.trials) return false;
  for (const auto& t : s_.trials)
    if (t.status != TrialStatus::completed && t.status != TrialStatus::failed) return false;
  return true;
}

// A member's next interval: go on, or copy a better member first (exploit and explore).
Work Scheduler::next_pbt(int group) {
  Work w;
  const int m = s_.member_of_group.at(static_cast<size_t>(group));
  const int interval = pbt_settings_.interval;
  if (m < 0 && started() < settings_.trials) {
    TrialRecord r;
    r.id = started();
    r.params = trial_params_(r.id);
    r.group = group;
    r.target_epochs = std::min(interval, settings_.max_epochs);
    s_.trials.push_back(r);
    s_.pending_copies.push_back(0);
    s_.member_of_group[static_cast<size_t>(group)] = r.id;
    w.kind = Work::Kind::run;
    w.trial = r.id;
    w.params = r.params;
    w.epochs = r.target_epochs;
    return w;
  }
  if (const auto it = std::find(interrupted_.begin(), interrupted_.end(), m);
      m >= 0 && it != interrupted_.end()) {
    // Resumed: the member goes on to the epochs it was training to, making its copy first if
    // the interruption came before the copy was confirmed.
    interrupted_.erase(it);
    const TrialRecord& r = s_.trials[static_cast<size_t>(m)];
    w.kind = Work::Kind::run;
    w.trial = m;
    w.params = r.params;
    w.epochs = r.target_epochs;
    w.resume = true;
    if (r.copy_from >= 0) {
      w.copy_from = r.copy_from;
      w.copy_from_group = s_.trials[static_cast<size_t>(r.copy_from)].group;
      w.copy_epoch = r.copy_epoch;
    }
    return w;
  }
  if (m < 0 || s_.trials[static_cast<size_t>(m)].status != TrialStatus::paused) {
    if (!population_done()) w.kind = Work::Kind::wait;
    if (population_done()) finish();
    return w;
  }
  // Generations: a member decides at epoch e once every live member has reported epoch e, and
  // compares their metrics at e. The decisions are then the same whatever the groups' speeds
  // (reproducible from the seed), at the price of groups waiting for the slowest each interval.
  const auto e = s_.trials[static_cast<size_t>(m)].metric.size();
  std::vector<int> ranked;
  for (const auto& t : s_.trials) {
    if (t.status == TrialStatus::failed) continue;
    if (t.metric.size() < e) {
      w.kind = Work::Kind::wait;
      return w;
    }
    if (!std::isnan(t.metric[e - 1])) ranked.push_back(t.id);
  }
  const auto at_e = [&](int t) { return s_.trials[static_cast<size_t>(t)].metric[e - 1]; };
  std::stable_sort(ranked.begin(), ranked.end(),
                   [&](int a, int b) { return better(at_e(a), at_e(b)); });
  TrialRecord& r = s_.trials[static_cast<size_t>(m)];
  w.kind = Work::Kind::run;
  w.trial = m;
  w.resume = true;
  r.status = TrialStatus::running;
  r.target_epochs = std::min(static_cast<int>(e) + interval, settings_.max_epochs);
  w.epochs = r.target_epochs;
  const size_t n = ranked.size();
  const size_t cut = std::max<size_t>(
      1, static_cast<size_t>(std::floor(static_cast<double>(n) * pbt_settings_.quantile)));
  const bool in_bottom = n >= 2 && std::find(ranked.end() - static_cast<std::ptrdiff_t>(cut),
                                             ranked.end(), m) != ranked.end();
  std::vector<int> donors;
  for (size_t i = 0; in_bottom && i < std::min(cut, n); ++i)
    if (ranked[i] != m) donors.push_back(ranked[i]);
  if (donors.empty()) {
    w.params = r.params;
    return w;
  }
  const auto decision = static_cast<uint64_t>(s_.exploits.size());
  const int d = donors[rng::counter_bits(rng::splitmix64(pbt_seed_), decision) % donors.size()];
  r.params = perturb_(s_.trials[static_cast<size_t>(d)].params, decision);
  ++s_.pending_copies[static_cast<size_t>(d)];
  s_.exploits.emplace_back(m, d);
  r.copy_from = d;
  r.copy_epoch = static_cast<int>(e);
  w.params = r.params;
  w.copy_from = d;
  w.copy_from_group = s_.trials[static_cast<size_t>(d)].group;
  w.copy_epoch = static_cast<int>(e);
  return w;
}

// The receiver's own metrics up to the copy stay: they are what ranked it in that generation,
// and the other members of the generation are still being ranked on them.
void Scheduler::copy_done(int trial, int donor, int epoch) {
  --s_.pending_copies.at(static_cast<size_t>(donor));
  TrialRecord& r = s_.trials.at(static_cast<size_t>(trial));
  r.copy_from = -1;
  r.metric.resize(static_cast<size_t>(epoch), std::numeric_limits<double>::quiet_NaN());
}

Work Scheduler::next(int group) {
  if (s_.finished) return {};
  if (pbt_) return next_pbt(group);
  Work w;
  w.kind = Work::Kind::run;
  if (!interrupted_.empty()) {
    TrialRecord& r = s_.trials[static_cast<size_t>(interrupted_.front())];
    interrupted_.erase(interrupted_.begin());
    r.group = group;
    w.trial = r.id;
    w.params = r.params;
    w.epochs = r.target_epochs;
    w.resume = true;
    return w;
  }
  if (const auto p = promotable()) {
    TrialRecord& r = s_.trials[static_cast<size_t>(p->first)];
    r.status = TrialStatus::running;
    r.group = group;
    r.target_epochs = rungs_[static_cast<size_t>(p->second)];
    w.trial = p->first;
    w.params = r.params;
    w.epochs = r.target_epochs;
    w.resume = true;
    return w;
  }
  if (started() < settings_.trials) {
    TrialRecord r;
    r.id = started();
    r.params = trial_params_(r.id);
    r.group = group;
    r.target_epochs = rungs_.front();
    s_.trials.push_back(r);
    for (auto& p : s_.promoted) p.push_back(false);
    s_.entrants.front().push_back(r.id);
    w.trial = r.id;
    w.params = r.params;
    w.epochs = r.target_epochs;
    return w;
  }
  // A running trial may still promote another (or be promoted) when it reports.
  for (const auto& r : s_.trials)
    if (r.status == TrialStatus::running) {
      Work wait;
      wait.kind = Work::Kind::wait;
      return wait;
    }
  finish();
  return {};
}

void Scheduler::epoch_done(int trial, int epoch, double metric) {
  CREST_CHECK(trial >= 0 && trial < started() && epoch >= 1, "epoch report of an unknown trial");
  TrialRecord& r = s_.trials[static_cast<size_t>(trial)];
  if (r.metric.size() < static_cast<size_t>(epoch))
    r.metric.resize(static_cast<size_t>(epoch), std::numeric_limits<double>::quiet_NaN());
  r.metric[static_cast<size_t>(epoch - 1)] = metric;
  if (!pbt_ && rung_of_epoch(epoch) >= 0) take_settled_results();
}

void Scheduler::run_failed(int trial, const std::string& message) {
  TrialRecord& r = s_.trials.at(static_cast<size_t>(trial));
  r.status = TrialStatus::failed;
  r.message = message;
  if (!pbt_) take_settled_results();
}

void Scheduler::run_ended(int trial, bool stopped_early) {
  TrialRecord& r = s_.trials.at(static_cast<size_t>(trial));
  const bool at_end = static_cast<int>(r.metric.size()) >= settings_.max_epochs;
  r.status = stopped_early || at_end ? TrialStatus::completed : TrialStatus::paused;
  if (!pbt_) take_settled_results();
}

void Scheduler::finish() {
  for (auto& r : s_.trials)
    if (r.status == TrialStatus::paused) r.status = TrialStatus::pruned;
  s_.finished = true;
}

std::optional<int> Scheduler::best() const {
  std::optional<int> best;
  size_t best_epochs = 0;
  double best_value = std::numeric_limits<double>::quiet_NaN();
  for (const auto& r : s_.trials) {
    if (r.status == TrialStatus::failed || r.metric.empty() || std::isnan(r.metric.back()))
      continue;
    // Trials trained longer are compared first: a metric after more epochs is the better guide.
    // A completed trial went its whole way, however few epochs that took (a run that reached
    // its quality target stops early): it ranks with those trained to the end.
    const size_t n =
        r.status == TrialStatus::completed ? std::numeric_limits<size_t>::max() : r.metric.size();
    if (!best || n > best_epochs || (n == best_epochs && better(r.metric.back(), best_value))) {
      best = r.id;
      best_epochs = n;
      best_value = r.metric.back();
    }
  }
  return best;
}

double Scheduler::best_metric() const {
  const auto b = best();
  return b ? s_.trials[static_cast<size_t>(*b)].metric.back()
           : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace crest
