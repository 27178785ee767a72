// output_dir/status.json: how the run stands, for people and for job scripts that must decide
// whether to resubmit (docs/run-directory.md). Written atomically by rank 0 when the run starts
// ("running") and when it ends; a run killed outright (SIGKILL, a node failure) leaves
// "running", and its newest checkpoint is then where a resume continues.
#pragma once
#include <cstdint>
#include <string>

namespace crest {

struct RunStatus {
  // running | finished (every epoch done or a stop rule) | preempted (a stop signal or the time
  // budget: resumable) | failed (an error; resumable from the newest checkpoint when one exists)
  std::string state = "running";
  std::string status;  // finished runs: success | aborted (the run's TrainSummary::status)
  std::string reason;  // preempted and failed runs: what happened, one line
  bool resumable = false;
  // Where the run stands: epochs completed, steps of the next one done, steps done in all.
  int epochs_done = 0;
  int64_t step_in_epoch = 0, global_step = 0;
  std::string checkpoint;  // the newest valid checkpoint, "" when none
  std::string resume;      // the command that continues the run, when resumable
  int exit_code = 0;       // what the process exits with
  // Dynamic loss scaling: the current scale (0: none) and the steps skipped for an overflow.
  double loss_scale = 0;
  int64_t overflow_steps = 0;
};

// Writes `dir`/status.json atomically; throws crest::Error naming the file when it cannot.
void write_run_status(const std::string& dir, const RunStatus& status);

}  // namespace crest
