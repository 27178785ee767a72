// The coordinator of a study (coordinator.hpp).
#include "coordinator.hpp"

#include <cmath>
#include <cstdio>
#include <iomanip>
#include <sstream>

#include "crest/core/atomic_file.hpp"
#include "crest/core/error.hpp"
#include "messages.hpp"
#include "study_report.hpp"
#include "study_state.hpp"

namespace crest::search_detail {
namespace {

std::string duration_text(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  char buf[32];
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%.0fs", s);
  else if (s < 3600)
    std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  else
    std::snprintf(buf, sizeof buf, "%dh%02dm", static_cast<int>(s) / 3600,
                  static_cast<int>(s) % 3600 / 60);
  return buf;
}

}  // namespace

Coordinator::Coordinator(CoordinatorSetup setup, Scheduler scheduler, StudyRecords records,
                         std::ostream& log)
    : setup_(std::move(setup)),
      scheduler_(std::move(scheduler)),
      records_(std::move(records)),
      log_(log),
      told_done_(static_cast<size_t>(setup_.groups), false) {}

nlohmann::json Coordinator::handle(const nlohmann::json& message) {
  std::lock_guard lock(mu_);
  const std::string op = message.at("op");
  if (op == "next") return next(message.at("group"));
  if (op == "copied")
    copied(message);
  else if (op == "epoch")
    epoch(message);
  else if (op == "end")
    end(message);
  else
    CREST_CHECK(false, "unknown study message '" + op + "'");
  return nullptr;
}

void Coordinator::restore(SchedulerState state) {
  std::lock_guard lock(mu_);
  scheduler_.restore(std::move(state));
  records_.load_existing(
      [this](int trial) { return scheduler_.trials().at(static_cast<size_t>(trial)).params; });
  for (const auto& row : records_.rows())
    if (!row.figures.empty()) last_row_[row.trial] = row;  // epoch rows, not PBT's copy rows
}

// After every decision, before its answer leaves: a study killed at any moment resumes from the
// last decision any group heard of.
void Coordinator::save_state() const { write_state(setup_.out_dir, scheduler_.state()); }

void Coordinator::write_report() const {
  StudyReportInput in;
  in.title = setup_.out_dir;
  in.description = setup_.description;
  in.metric = setup_.metric;
  in.lower_is_better = setup_.lower_is_better;
  in.keys = setup_.keys;
  in.scheduler = &scheduler_;
  in.rows = &records_.rows();
  write_study_report(setup_.out_dir, in);
}

bool Coordinator::all_groups_done() {
  std::lock_guard lock(mu_);
  for (bool d : told_done_)
    if (!d) return false;
  return true;
}

nlohmann::json Coordinator::next(int group) {
  const bool was_finished = scheduler_.finished();
  const Work w = scheduler_.next(group);
  if (w.kind == Work::Kind::done) {
    told_done_.at(static_cast<size_t>(group)) = true;
    if (!was_finished)  // the scheduler just ended: its paused trials became pruned
      for (const auto& t : scheduler_.trials())
        if (t.status == TrialStatus::pruned) add_status_row(t.id, "pruned", "");
  }
  if (w.kind != Work::Kind::wait) save_state();
  if (w.kind == Work::Kind::run) progress();
  return work_to_json(w);
}

void Coordinator::epoch(const nlohmann::json& m) {
  const int trial = m.at("trial");
  TrialRow row;
  row.trial = trial;
  row.group = m.at("group");
  row.status = "running";
  row.epoch = m.at("epoch");
  row.params = scheduler_.trials().at(static_cast<size_t>(trial)).params;
  for (const auto& [name, v] : m.at("figures").items())
    row.figures.emplace_back(name, v.is_null() ? std::nan("") : v.get<double>());
  row.seconds = m.at("seconds");
  const double metric = m.at("metric").is_null() ? std::nan("") : m.at("metric").get<double>();
  scheduler_.epoch_done(trial, row.epoch, metric);
  records_.add(row);
  save_state();
  last_row_[trial] = row;
  epoch_seconds_sum_ += row.seconds;
  ++epochs_reported_;
  // Epoch reports come from every group: a line at most every 10 s between the decisions' own.
  if (std::chrono::steady_clock::now() - last_progress_ > std::chrono::seconds(10)) progress();
}

// A PBT receiver has its donor's state: a row says so, with the transfer's size and time.
void Coordinator::copied(const nlohmann::json& m) {
  const int trial = m.at("trial"), donor = m.at("donor"), epoch = m.at("epoch");
  scheduler_.copy_done(trial, donor, epoch);
  TrialRow row;
  row.trial = trial;
  row.group = m.at("group");
  row.status = "running";
  row.epoch = epoch;
  row.params = scheduler_.trials().at(static_cast<size_t>(trial)).params;
  std::ostringstream text;
  text << "copied trial " << donor << "'s weights and optimizer state at epoch " << epoch << " ("
       << m.at("checkpoint").get<std::string>() << ", " << m.at("bytes").get<uint64_t>()
       << " bytes in " << std::fixed << std::setprecision(3) << m.at("seconds").get<double>()
       << " s), then perturbed";
  row.message = text.str();
  records_.add(row);
  save_state();
  progress();
}

void Coordinator::end(const nlohmann::json& m) {
  const int trial = m.at("trial");
  if (!m.at("ok").get<bool>()) {
    const std::string message = m.at("message");
    scheduler_.run_failed(trial, message);
    add_status_row(trial, "failed", message);
  } else {
    scheduler_.run_ended(trial, m.at("stopped_early").get<bool>());
    if (scheduler_.trials().at(static_cast<size_t>(trial)).status == TrialStatus::completed)
      add_status_row(trial, "completed", "");
  }
  save_state();
  write_results_table();
  write_best();
  write_report();
  progress();
}

// A status row repeats the trial's newest figures, so the rows with a final status are the
// study's result table on their own.
void Coordinator::add_status_row(int trial, const std::string& status, const std::string& message) {
  TrialRow row;
  if (const auto it = last_row_.find(trial); it != last_row_.end()) row = it->second;
  const TrialRecord& t = scheduler_.trials().at(static_cast<size_t>(trial));
  row.trial = trial;
  row.group = t.group;
  row.params = t.params;
  row.status = status;
  row.message = message;
  records_.add(row);
}

void Coordinator::write_results_table() const {
  records_.write_csv([this](int trial) {
    return status_name(scheduler_.trials().at(static_cast<size_t>(trial)).status);
  });
}

void Coordinator::write_best() {
  const auto best = scheduler_.best();
  if (!best) return;
  const TrialRecord& t = scheduler_.trials()[static_cast<size_t>(*best)];
  // The same trial trained further (a promotion) is a new best config: its epochs changed.
  const std::pair<int, size_t> written{t.id, t.metric.size()};
  if (written == best_written_) return;
  AtomicOutputFile file(setup_.out_dir + "/best.yaml");
  file.write("# crest search: trial " + std::to_string(t.id) + ", " + setup_.metric + " " +
             std::to_string(t.metric.back()) + " after " + std::to_string(t.metric.size()) +
             " epochs. Train it with: crest train --config best.yaml\n");
  file.write(setup_.config_yaml(t.params, static_cast<int>(t.metric.size())));
  file.commit();
  best_written_ = written;
}

// A rough estimate: the mean epoch time so far times the epochs still to train (new trials'
// first rungs, running trials' rest), spread over the groups.
double Coordinator::eta_seconds() const {
  if (epochs_reported_ == 0) return std::nan("");
  const SchedulerSettings& s = scheduler_.settings();
  double epochs_left = static_cast<double>(s.trials - scheduler_.started()) * s.min_epochs;
  for (const auto& t : scheduler_.trials())
    if (t.status == TrialStatus::running)
      epochs_left += std::max(0, t.target_epochs - static_cast<int>(t.metric.size()));
  return epoch_seconds_sum_ / epochs_reported_ * epochs_left / setup_.groups;
}

void Coordinator::progress() {
  int running = 0, completed = 0, pruned = 0, failed = 0, paused = 0;
  for (const auto& t : scheduler_.trials()) {
    running += t.status == TrialStatus::running;
    completed += t.status == TrialStatus::completed;
    pruned += t.status == TrialStatus::pruned;
    failed += t.status == TrialStatus::failed;
    paused += t.status == TrialStatus::paused;
  }
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  log_ << "search " << duration_text(elapsed) << ": " << scheduler_.started() << "/"
       << scheduler_.settings().trials << " started, " << running << " running, " << completed
       << " completed, " << paused << " paused, " << pruned << " pruned, " << failed << " failed";
  if (const auto b = scheduler_.best()) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.6g", scheduler_.best_metric());
    log_ << " | best " << setup_.metric << " " << buf << " (trial " << *b << ")";
  }
  log_ << " | ETA " << duration_text(eta_seconds()) << "\n";
  log_.flush();
  last_progress_ = std::chrono::steady_clock::now();
}

void Coordinator::finish() {
  std::lock_guard lock(mu_);
  write_results_table();
  write_best();
  write_report();
  progress();
}

}  // namespace crest::search_detail
