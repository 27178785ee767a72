// A failure on some ranks only, made the whole job's (docs/distributed.md "A rank that fails
// alone"). A rank whose batch cannot be read (its shard holds a damaged file), or whose checkpoint
// write fails, would otherwise leave the other ranks waiting in the next collective until the
// watchdog ends the job — under `crest search`, the whole study. The failing rank records its
// error and goes on joining the collectives up to the next point where the ranks agree anyway (the
// step's gradient exchange, the validation sums); there every rank learns that one failed and
// throws the same error, naming that rank, so the run (or the trial) ends on every rank at once.
#pragma once
#include <optional>
#include <string>

#include "crest/core/error.hpp"
#include "crest/dist/communicator.hpp"

namespace crest {

class RankFailure {
 public:
  // Keeps this rank's first failure (later ones follow from it).
  void record(const std::exception& e);
  bool failed() const { return message_.has_value(); }

  // Every rank calls it once the ranks agree that at least one failed: throws, on every rank, the
  // error of the lowest failing rank, prefixed with `where` and that rank. Two small collectives,
  // only then.
  [[noreturn]] void throw_together(Communicator& comm, const std::string& where) const;
  // Where no collective carries the news: one of its own (a flag's maximum) on every rank, then
  // throw_together when some rank failed.
  void check_together(Communicator& comm, const std::string& where) const;

 private:
  std::optional<std::string> message_;
  ErrorKind kind_ = ErrorKind::runtime;
};

}  // namespace crest
