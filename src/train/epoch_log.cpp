#include "epoch_log.hpp"

#include <algorithm>
#include <iomanip>
#include <ostream>

#include "crest/core/units.hpp"
#include "crest/optim/loss_scaler.hpp"

namespace crest {

void EpochLog::epoch(const EpochStats& st) {
  log_ << "epoch " << st.epoch << "/" << n_epochs_ << std::fixed << std::setprecision(4)
       << "  loss " << st.train_loss;
  if (st.validated) {
    log_ << "  val_loss " << st.val_loss;
    for (const MetricValue& m : st.val_metrics) log_ << "  val_" << m.name << " " << m.value;
  }
  log_ << std::setprecision(5) << "  lr " << st.lr;
  if (st.loss_scale > 0) {
    log_ << "  loss_scale " << loss_scale_text(st.loss_scale);
    if (st.overflow_steps > 0)
      log_ << " (" << st.overflow_steps << (st.overflow_steps == 1 ? " step" : " steps")
           << " skipped: overflow)";
  }
  log_ << std::setprecision(2) << "  " << st.samples_per_s << " samples/s  data wait "
       << std::setprecision(1) << 100.0 * st.data_wait_s / std::max(st.train_seconds, 1e-9) << "%  "
       << std::setprecision(1) << st.seconds << " s";
  if (st.skipped > 0) log_ << "  (" << st.skipped << " bad samples skipped)";
  // The rest of the run at this invocation's mean epoch time (the first epoch included: it pays
  // for cache misses the others do not, so the estimate errs long early on).
  epochs_s_ += st.seconds;
  ++epochs_;
  if (st.epoch < n_epochs_)
    log_ << "  ETA " << human_duration(epochs_s_ / epochs_ * (n_epochs_ - st.epoch));
  log_ << "\n";
  log_.flush();
}

void EpochLog::done(const TrainSummary& summary, double seconds) {
  log_ << std::fixed << "done: " << summary.epochs.size() << " epochs in " << std::setprecision(1)
       << seconds << " s";
  if (!summary.epochs.empty()) {
    const EpochStats& last = summary.epochs.back();
    log_ << "; final loss " << std::setprecision(4) << last.train_loss;
    if (last.validated)
      for (const MetricValue& m : last.val_metrics) log_ << ", val_" << m.name << " " << m.value;
  }
  log_ << "; " << with_thousands(summary.parameter_count) << " parameters; status "
       << summary.status << "\n";
}

}  // namespace crest
