// The layout tuner: which (src, dst) layout pair a convolution uses when crest.autotune asks for
// the fastest one rather than the first that has no reference kernel. It keeps the choices (the
// per-machine cache, this run's record) and owns the clock; conv.cpp builds and times the
// candidates. docs/performance.md "Layouts chosen by measurement" says what is timed.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "crest/backends/layout_tuning.hpp"

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

// The cache file used when LayoutTuning::cache_file is empty: $CREST_LAYOUT_CACHE, else
// $XDG_CACHE_HOME/crest/layouts.json, else $HOME/.cache/crest/layouts.json ("" when none is set).
std::string default_layout_cache_path();

// Warnings and notes (stderr by default).
using TunerNotes = std::function<void(const std::string&)>;

class LayoutTuner {
 public:
  // A fresh run (reuse_record false) forgets an earlier run's record file at once, so a later
  // resume never reads choices this run did not make.
  LayoutTuner(LayoutTuning options, std::unique_ptr<LayoutTimer> timer, TunerNotes notes = {});

  // Whether conv kernels consult the tuner at all (measuring, or resuming a tuned run).
  bool active() const { return options_.measure || options_.reuse_record; }
  bool measures() const { return options_.measure; }
  // The candidate chosen before for `problem`: the resumed run's record first, then (when
  // measuring) this machine's cache; nullopt when there is none.
  std::optional<std::string> known(const std::string& problem);
  // Keeps a choice in this run's record and, when it was measured, in the machine cache. Files
  // that cannot be written are warned about once each; the run goes on.
  void remember(const std::string& problem, const std::string& candidate, bool measured);

  // CREST_AUTOTUNE_VERBOSE set: a note for every tuned kernel, also when its choice was known
  // (in creation order, which is the program's execution order: a profile's layers map onto them).
  bool verbose() const { return verbose_; }
  LayoutTimer& timer() { return *timer_; }
  void note(const std::string& line) const;
  const std::string& machine() const { return machine_; }
  const std::string& cache_path() const { return cache_path_; }

 private:
  using Choices = std::map<std::string, std::string>;  // problem -> candidate
  void load_cache();
  void store_in_cache(const std::string& problem, const std::string& candidate);
  void write_record();
  void warn_once(bool& warned, const std::string& line) const;

  LayoutTuning options_;
  std::unique_ptr<LayoutTimer> timer_;
  TunerNotes notes_;
  std::string machine_, cache_path_;
  Choices cache_;   // this machine's section of the cache file
  Choices pinned_;  // the resumed run's record
  Choices record_;  // this run's choices (the pinned ones included)
  bool cache_loaded_ = false;
  bool verbose_ = false;
  mutable bool cache_read_warned_ = false, cache_write_warned_ = false, record_warned_ = false;
};

}  // namespace crest::onednn
