// Choices a backend makes by measuring, one per problem — a convolution's memory layouts on
// oneDNN (crest.autotune), its cuDNN algorithms on cuda — kept in two files: the machine's cache
// (one section per machine signature; the runs and ranks of a node share it) and this run's
// record, which a resumed run takes first, whatever a cache or a new measurement would say, so
// that it computes as the run it continues did (the same layouts or algorithms, so the same
// rounding). docs/performance.md "Layouts chosen by measurement".
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "crest/backends/layout_tuning.hpp"

namespace crest {

// The cache file used when LayoutTuning::cache_file is empty: $CREST_LAYOUT_CACHE, else
// $XDG_CACHE_HOME/crest/layouts.json, else $HOME/.cache/crest/layouts.json ("" when none is set).
std::string default_layout_cache_path();

// Warnings and notes (stderr by default).
using TunerNotes = std::function<void(const std::string&)>;

class TunedChoices {
 public:
  // `machine`: what a choice depends on besides the problem (the CPU or GPU model, the library's
  // version, ...): a choice measured under one signature is not reused under another. A fresh run
  // (reuse_record false) forgets an earlier run's record file at once, so a later resume never
  // reads choices this run did not make; a resumed run whose record is missing or damaged is an
  // input error naming the file.
  TunedChoices(LayoutTuning options, std::string machine, TunerNotes notes = {});

  // Whether the backend consults the choices at all (measuring, or resuming a tuned run).
  bool active() const { return options_.measure || options_.reuse_record; }
  bool measures() const { return options_.measure; }
  // The candidate chosen before for `problem`: the resumed run's record first, then (when
  // measuring) this machine's cache; nullopt when there is none.
  std::optional<std::string> known(const std::string& problem);
  // Keeps a choice in this run's record and, when it was measured, in the machine cache. Files
  // that cannot be written are warned about once each; the run goes on.
  void remember(const std::string& problem, const std::string& candidate, bool measured);

  void note(const std::string& line) const;
  const std::string& machine() const { return machine_; }
  const std::string& cache_path() const { return cache_path_; }
  const std::string& record_path() const { return options_.record_file; }

 private:
  using Choices = std::map<std::string, std::string>;  // problem -> candidate
  void load_cache();
  void store_in_cache(const std::string& problem, const std::string& candidate);
  void write_record();
  void warn_once(bool& warned, const std::string& line) const;

  LayoutTuning options_;
  TunerNotes notes_;
  std::string machine_, cache_path_;
  Choices cache_;   // this machine's section of the cache file
  Choices pinned_;  // the resumed run's record
  Choices record_;  // this run's choices (the pinned ones included)
  bool cache_loaded_ = false;
  mutable bool cache_read_warned_ = false, cache_write_warned_ = false, record_warned_ = false;
};

}  // namespace crest
