// When a run ends before data.n_epochs, and what it ended as: the task's quality target
// (MLPerf's time-to-train stop) and early stopping on the validation loss.
#pragma once
#include <optional>
#include <string>

#include "crest/train/checkpoint.hpp"
#include "crest/train/task.hpp"

namespace crest {

struct StopDecision {
  bool stop = false;
  std::string status;   // the run's status when it stops here: "success" or "aborted"
  std::string message;  // for the log, when it stops
};

class StopRules {
 public:
  StopRules(const Task& task, std::optional<int> early_stopping_patience);

  // After an epoch: whether to stop. Keeps early stopping's state in `pos` (saved in
  // checkpoints, so a resumed run counts on).
  StopDecision after_epoch(const EpochStats& st, TrainingPosition& pos) const;
  // The status of a run that trained all its epochs: "aborted" when it had a target to reach
  // (it never did, or it would have stopped), else "success".
  std::string status_after_last_epoch() const;

 private:
  std::optional<QualityTarget> target_;
  std::optional<int> patience_;
};

}  // namespace crest
