// Signals that end a run cleanly (train.stop_signals: SIGTERM, SIGINT, SIGUSR1 by default): a
// scheduler's preemption warning (Slurm's --signal=B:TERM@120, scancel), a wall-time warning, or
// Ctrl-C. The first one asks the run to stop after the current step with a checkpoint; a second
// one ends the process at once (exit 128 + signal): checkpoint writes are atomic, so nothing is
// corrupted, only the step in progress is lost.
//
// The handler does only async-signal-safe work: one lock-free atomic store and a write(2) of a
// fixed message. The training loop polls received() once per step and sends the request to
// every rank with the step's gradients (TrainStep's sideband), so no rank stops alone.
#pragma once
#include <csignal>
#include <string>
#include <utility>
#include <vector>

namespace crest {

class StopSignals {
 public:
  // Installs the handler for each named signal ("TERM", "INT", ...; validated by the config).
  explicit StopSignals(const std::vector<std::string>& names);
  // Restores the handlers that were there before.
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // The first stop signal this process received, 0 when none.
  static int received();

 private:
  std::vector<std::pair<int, struct sigaction>> previous_;
};

// "SIGTERM" for SIGTERM; "signal N" for numbers it does not know.
std::string signal_name(int signal);
// The number of "TERM" / "SIGTERM", 0 when unknown.
int signal_number(const std::string& name);

}  // namespace crest
