// Signals that end a run cleanly (train.stop_signals: SIGTERM, SIGINT, SIGUSR1 by default): a
// scheduler's preemption warning (Slurm's --signal=B:TERM@120, scancel), a wall-time warning, or
// Ctrl-C. The first one asks the run to stop after the current step with a checkpoint; a second
// one ends the process at once (exit 128 + signal): checkpoint writes are atomic, so nothing is
// corrupted, only the step in progress is lost.
//
// Every signal of the stop set is taken by one thread that runs nothing else (the signal router,
// named "crest-signals"), never by a thread that may be inside a kernel: every other thread
// blocks them. The reason is a kernel that moves its stack pointer onto the heap: oneDNN's f32
// JIT sgemm (jit_avx_gemm_f32, which `gemm:jit` convolutions run on CPUs without AVX-512) points
// rsp at a malloc'd workspace for K blocks over its stack capacity (252 with AVX2), and a signal
// handled on that thread has its frame written below the workspace, over the heap ("corrupted
// size vs. prev_size" in the next free; docs/upstream/onednn-avx2-sgemm-signal.md).
// docs/checkpoints.md, "Stopping before the end".
//
// The training loop polls received() once per step and sends the request to every rank with the
// step's gradients (TrainStep's sideband), so no rank stops alone.
#pragma once
#include <csignal>
#include <string>
#include <vector>

namespace crest {

// Blocks the stop set in the calling thread and starts the router thread (once per process).
// main() calls it before any other thread exists, so every thread inherits the blocked mask;
// a signal of the set that no StopSignals asks for gets its usual disposition (the default ends
// the process, as if nothing had been blocked).
void route_stop_signals();

// In-process use (a program that embeds crest, crest's Python module): threads the program
// started before crest have the set unblocked, so a signal may land on one of them rather than
// reach the router. While armed, a StopSignals therefore also installs a handler for its signals
// that does what the router does (restoring the program's own handlers when disarmed). It can
// only run on such a foreign thread: crest's threads block the set, as long as the program calls
// into crest inside a StopSignalsBlocked, so the compute threads crest starts inherit the block.
class StopSignalsBlocked {
 public:
  StopSignalsBlocked();   // blocks the stop set on the calling thread
  ~StopSignalsBlocked();  // restores the thread's mask
  StopSignalsBlocked(const StopSignalsBlocked&) = delete;
  StopSignalsBlocked& operator=(const StopSignalsBlocked&) = delete;

 private:
  sigset_t previous_mask_{};
};

class StopSignals {
 public:
  // Arms the named signals ("TERM", "INT", ...; validated by the config) and starts the router
  // if main() did not (in-process use: the calling thread blocks the set for the object's life,
  // and a handler takes a signal that lands on a foreign thread, above).
  explicit StopSignals(const std::vector<std::string>& names);
  // Disarms them and restores the calling thread's signal mask.
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // The first stop signal this process received while armed, 0 when none.
  static int received();

 private:
  unsigned armed_bits_ = 0;
  sigset_t previous_mask_{};  // the calling thread's mask before arming
};

// "SIGTERM" for SIGTERM; "signal N" for numbers it does not know.
std::string signal_name(int signal);
// The number of "TERM" / "SIGTERM", 0 when unknown.
int signal_number(const std::string& name);

}  // namespace crest
