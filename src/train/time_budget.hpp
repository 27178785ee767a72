// The job's wall-time budget (train.max_wall_time, or Slurm's SLURM_JOB_END_TIME): the run stops
// with a checkpoint while there is still time to write it, instead of being killed by the
// scheduler mid-step and losing everything since the last checkpoint.
//
// The safety margin is measured, not guessed: twice the slowest step, twice the slowest
// checkpoint write (a step's time until one was written) and the slowest validation pass, all
// as seen by this run. Each rank judges its own clock; a rank whose budget is spent asks the job
// to stop like a signal would (TrainStep's sideband), so all ranks stop after the same step.
//
// Test hook (documented in docs/checkpoints.md): CREST_TEST_SECONDS_PER_STEP=X makes every
// training step count as X seconds on the budget's clock, so tests stop at a chosen step
// without depending on how fast the machine is.
#pragma once
#include <chrono>
#include <optional>
#include <string>

#include "crest/train/config.hpp"

namespace crest {

class TimeBudget {
 public:
  using Clock = std::chrono::steady_clock;
  // `started`: when the process began the run (the budget counts from there).
  TimeBudget(const TrainConfig& config, Clock::time_point started);

  bool enabled() const { return deadline_.has_value(); }
  // Where the budget comes from, for the run's header: "max_wall_time 2 h 00 min",
  // "SLURM_JOB_END_TIME (1 h 58 min left)"; "" when disabled.
  const std::string& source() const { return source_; }

  void step_done(double seconds);
  void checkpoint_done(double seconds);
  void validation_done(double seconds);

  double left_s() const;    // seconds until the deadline (negative past it)
  double margin_s() const;  // what stopping cleanly needs
  // Whether the run should stop now: less budget left than the margin.
  bool spent() const { return enabled() && left_s() < margin_s(); }

 private:
  double now_s() const;  // seconds since `started`, test offset included

  Clock::time_point started_;
  std::optional<double> deadline_;  // seconds after started_
  std::string source_;
  double slowest_step_s_ = 0, slowest_checkpoint_s_ = 0, slowest_validation_s_ = 0;
  double test_seconds_per_step_ = 0, test_offset_s_ = 0;
};

}  // namespace crest
