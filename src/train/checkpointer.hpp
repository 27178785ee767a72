// When a run writes checkpoints and what goes into them (train.checkpoint_every, _keep): the
// trainer asks after each step and each epoch; rank 0 writes, the other ranks send it what only
// they hold (SavedState::provide: a pipeline's stages, a spatial group's divided parameters).
#pragma once
#include <iosfwd>
#include <string>
#include <vector>

#include "crest/engine/saved_state.hpp"
#include "crest/optim/loss_scaler.hpp"
#include "crest/train/checkpoint.hpp"
#include "crest/train/config.hpp"

namespace crest {

struct CheckpointContext {
  std::string dir;      // "" for no checkpoints (no output_dir, a dry run)
  bool writer = false;  // rank 0
  int ranks = 1;
  int64_t batch_size = 0, steps_per_epoch = 0;
};

class Checkpointer {
 public:
  // `scaler`: the run's loss scaler, null without one.
  Checkpointer(const Config& config, CheckpointContext context, SavedState& state,
               const LossScaler* scaler, std::ostream& log);

  // Whether train.checkpoint_every asks for one after global step `global_step` (1-based)...
  bool due_after_step(int64_t global_step) const;
  // ... or after epoch `epoch` (0-based).
  bool due_after_epoch(int epoch) const;
  // Collective over the job. Writes the run's state between two steps: `at` with the executor's
  // and optimizer's counters and the loss scaler's state filled in, and the finished epochs. Logs
  // its size and time. A failed write throws (train.checkpoint_failures: stop) or is logged and
  // left for the next interval (tolerate); either way the message names the checkpoint a resume
  // would use.
  void write(TrainingPosition at, const std::vector<EpochStats>& history);
  const std::string& last() const { return last_; }  // "" until one is written
  bool last_failed() const { return last_failed_; }  // the newest write attempt failed
  int failures() const { return failures_; }         // tolerated failures so far
  std::string newest_valid() const;                  // what a resume would use, "" if none

 private:
  const Config& config_;
  CheckpointContext context_;
  SavedState& state_;
  const LossScaler* scaler_;
  std::ostream& log_;
  std::string last_;
  bool last_failed_ = false;
  int failures_ = 0;
};

}  // namespace crest
