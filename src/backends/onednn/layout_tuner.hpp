// The layout tuner: which (src, dst) layout pair a convolution uses when crest.autotune asks for
// the fastest one rather than the first that has no reference kernel. Its choices are kept as
// every backend's measured choices are (TunedChoices: the per-machine cache, this run's record);
// it owns the clock; conv.cpp builds and times the candidates. docs/performance.md "Layouts
// chosen by measurement" says what is timed.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "crest/backends/layout_tuning.hpp"
#include "tuned_choices.hpp"

namespace crest::onednn {

// What one pass of one candidate costs. Injectable, so tests give fake timings (and count the
// measurements) instead of reading a clock.
class LayoutTimer {
 public:
  virtual ~LayoutTimer() = default;
  // Seconds one run of `call` takes; `candidate` and `pass` name what is timed.
  virtual double seconds(const std::string& candidate, const std::string& pass,
                         const std::function<void()>& call) = 0;
};

// The steady clock: one warm-up call (first-touch pages, oneDNN's lazy JIT), then the fastest of
// `repetitions` calls (the least disturbed by other work on the machine).
std::unique_ptr<LayoutTimer> make_clock_timer(int repetitions = 3);

// CPU model, oneDNN version and ISA, compute threads: a choice measured under one signature is
// not reused under another.
std::string machine_signature();

// The tuned choices (crest/backends' TunedChoices: the machine cache, this run's record) under
// this machine's signature, the clock that measures candidates, and CREST_AUTOTUNE_VERBOSE.
class LayoutTuner {
 public:
  LayoutTuner(LayoutTuning options, std::unique_ptr<LayoutTimer> timer, TunerNotes notes = {});

  bool active() const { return choices_.active(); }
  bool measures() const { return choices_.measures(); }
  std::optional<std::string> known(const std::string& problem) { return choices_.known(problem); }
  void remember(const std::string& problem, const std::string& candidate, bool measured) {
    choices_.remember(problem, candidate, measured);
  }

  // CREST_AUTOTUNE_VERBOSE set: a note for every tuned kernel, also when its choice was known
  // (in creation order, which is the program's execution order: a profile's layers map onto them).
  bool verbose() const { return verbose_; }
  LayoutTimer& timer() { return *timer_; }
  void note(const std::string& line) const { choices_.note(line); }
  const std::string& machine() const { return choices_.machine(); }
  const std::string& cache_path() const { return choices_.cache_path(); }

 private:
  TunedChoices choices_;
  std::unique_ptr<LayoutTimer> timer_;
  bool verbose_ = false;
};

}  // namespace crest::onednn
