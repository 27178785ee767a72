// When a run writes checkpoints and what goes into them (train.checkpoint_every, _keep): the
// trainer asks after each step and each epoch; rank 0 writes, the other ranks hold the same
// state and do nothing.
#pragma once
#include <iosfwd>
#include <string>
#include <vector>

#include "crest/graph/executor.hpp"
#include "crest/optim/optimizer.hpp"
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
  Checkpointer(const Config& config, CheckpointContext context, Executor& ex, Optimizer& optimizer,
               std::ostream& log);

  // Whether train.checkpoint_every asks for one after global step `global_step` (1-based)...
  bool due_after_step(int64_t global_step) const;
  // ... or after epoch `epoch` (0-based).
  bool due_after_epoch(int epoch) const;
  // Writes the run's state between two steps: `at` with the executor's and optimizer's
  // counters filled in, and the finished epochs. Logs its size and time.
  void write(TrainingPosition at, const std::vector<EpochStats>& history);
  const std::string& last() const { return last_; }  // "" until one is written

 private:
  const Config& config_;
  CheckpointContext context_;
  Executor& ex_;
  Optimizer& optimizer_;
  std::ostream& log_;
  std::string last_;
};

}  // namespace crest
