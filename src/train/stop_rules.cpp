#include "stop_rules.hpp"

namespace crest {

StopRules::StopRules(const Task& task, std::optional<int> early_stopping_patience)
    : target_(task.target), patience_(early_stopping_patience) {}

StopDecision StopRules::after_epoch(const EpochStats& st, TrainingPosition& pos) const {
  if (!st.validated) return {};
  if (target_) {
    const std::optional<double> v = st.val_metric(target_->metric->short_name);
    if (v && target_->reached(*v))
      return {true, "success", "target reached: " + target_->describe(*v)};
  }
  if (!patience_) return {};
  if (st.val_loss < pos.best_val_loss) {
    pos.best_val_loss = st.val_loss;
    pos.epochs_since_best = 0;
    return {};
  }
  if (++pos.epochs_since_best < *patience_) return {};
  return {true, status_after_last_epoch(),
          "early stopping: val_loss has not improved for " + std::to_string(pos.epochs_since_best) +
              " epochs"};
}

std::string StopRules::status_after_last_epoch() const { return target_ ? "aborted" : "success"; }

}  // namespace crest
