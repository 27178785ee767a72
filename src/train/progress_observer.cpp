// Progress inside an epoch (the epoch lines themselves are the trainer's): a self-overwriting bar
// on the terminal when stdout is one, else a plain line every train.log_every_s seconds, so batch
// job logs get a heartbeat without drowning in carriage returns.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>

#include "crest/train/observers.hpp"
#include "crest/train/trainer.hpp"

namespace crest {
namespace {

using Clock = std::chrono::steady_clock;

class ProgressObserver : public RunObserver {
 public:
  ProgressObserver(std::ostream& log, double interval_s, bool terminal)
      : log_(log), interval_s_(interval_s), terminal_(terminal) {}

  void run_start(const RunFacts& f) override {
    global_batch_ = f.global_batch;
    epochs_ = f.config ? f.config->data.n_epochs : 0;
  }
  void epoch_start(int) override {
    // A bar shows from the first step; plain lines wait one interval (short epochs print none).
    last_ = terminal_ ? Clock::time_point{} : Clock::now();
    first_step_ = -1;
  }
  void step_end(const StepInfo& s) override {
    if (first_step_ < 0) first_step_ = s.step_in_epoch - 1;  // a resumed epoch starts part-way
    const auto now = Clock::now();
    const bool last_step = s.step_in_epoch == s.steps_per_epoch;
    const double due = terminal_ ? 0.2 : interval_s_;
    if (last_step || std::chrono::duration<double>(now - last_).count() < due) return;
    last_ = now;
    const int64_t done = s.step_in_epoch - first_step_;
    const double rate = static_cast<double>(done) / std::max(s.epoch_elapsed_s, 1e-9);  // steps/s
    const double eta =
        static_cast<double>(s.steps_per_epoch - s.step_in_epoch) / std::max(rate, 1e-9);
    char text[256];
    std::snprintf(
        text, sizeof text,
        "epoch %d/%d: step %lld/%lld (%.0f%%), %.2f samples/s, loss %.4f, epoch ETA %.0f s",
        s.epoch, epochs_, static_cast<long long>(s.step_in_epoch),
        static_cast<long long>(s.steps_per_epoch),
        100.0 * static_cast<double>(s.step_in_epoch) / static_cast<double>(s.steps_per_epoch),
        rate * static_cast<double>(global_batch_), s.loss, eta);
    if (terminal_) {
      // Straight to the terminal, not into train.log: a bar is only meaningful where it redraws.
      std::cout << '\r' << bar(s.step_in_epoch, s.steps_per_epoch) << ' ' << text << "\033[K"
                << std::flush;
      drawn_ = true;
    } else {
      log_ << text << '\n' << std::flush;
    }
  }
  void eval_start(const EpochStats&) override { clear(); }
  void epoch_stop(const EpochStats&) override { clear(); }

 private:
  static std::string bar(int64_t done, int64_t total) {
    constexpr int kWidth = 24;
    const int filled = static_cast<int>(kWidth * done / std::max<int64_t>(total, 1));
    return "[" + std::string(static_cast<size_t>(filled), '#') +
           std::string(static_cast<size_t>(kWidth - filled), '.') + "]";
  }
  void clear() {
    if (!drawn_) return;
    std::cout << "\r\033[K" << std::flush;
    drawn_ = false;
  }

  std::ostream& log_;
  double interval_s_;
  bool terminal_;
  bool drawn_ = false;
  int64_t global_batch_ = 1;
  int epochs_ = 0;
  int64_t first_step_ = -1;
  Clock::time_point last_;
};

}  // namespace

std::unique_ptr<RunObserver> make_progress_observer(std::ostream& log, double log_every_s,
                                                    bool terminal) {
  return std::make_unique<ProgressObserver>(log, log_every_s, terminal);
}

// Always: a bar on a terminal stdout (unless TrainOptions::progress_bar is off), else lines on
// the log.
CREST_REGISTER_OBSERVER(progress, ObserverType{"progress", 10, [](const ObserverContext& c) {
                                                 return make_progress_observer(
                                                     c.log, c.config.train.log_every_s,
                                                     c.progress_bar && isatty(STDOUT_FILENO) == 1);
                                               }});

}  // namespace crest
