#include "rank_failure.hpp"

#include <cstdint>

namespace crest {

void RankFailure::record(const std::exception& e) {
  if (message_) return;
  message_ = e.what();
  if (const auto* error = dynamic_cast<const Error*>(&e)) kind_ = error->kind();
}

void RankFailure::throw_together(Communicator& comm, const std::string& where) const {
  // The lowest failing rank as the largest of (ranks - rank) over the failing ones.
  const int size = comm.size();
  const int lowest = size - static_cast<int>(comm.allreduce_max(failed() ? size - comm.rank() : 0));
  CREST_CHECK(lowest >= 0 && lowest < size, "throw_together without a failed rank");
  int64_t kind = static_cast<int64_t>(kind_);
  std::string text = message_.value_or("");
  comm.broadcast(&kind, sizeof kind, lowest);
  uint64_t n = text.size();
  comm.broadcast(&n, sizeof n, lowest);
  text.resize(n);
  if (n > 0) comm.broadcast(text.data(), n, lowest);
  const std::string rank =
      size > 1 ? "rank " + std::to_string(lowest) + " of " + std::to_string(size) + ": " : "";
  throw Error(static_cast<ErrorKind>(kind), where + ": " + rank + text,
              comm.rank() == lowest ? Error::Scope::every_rank_printed_here
                                    : Error::Scope::every_rank_printed_elsewhere);
}

void RankFailure::check_together(Communicator& comm, const std::string& where) const {
  if (comm.allreduce_max(failed() ? 1.0 : 0.0) > 0) throw_together(comm, where);
}

}  // namespace crest
