// Timeline: what each rank did when, as a Chrome trace (the format of Horovod's timeline; open
// it in chrome://tracing or https://ui.perfetto.dev). One process row per rank, with a compute
// thread row (data wait, forward, backward, gradient wait, optimizer) and a communication row
// (each gradient bucket: queued, then running until done).
//
// Ranks record into memory with times relative to a common origin (taken right after a
// barrier, so rows line up on one node; across nodes clocks differ by the barrier's skew), and
// write() gathers every rank's events to rank 0, which writes the file atomically. Recording
// stops at `max_events` per rank (the file says so) so a long run cannot exhaust memory.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "crest/dist/communicator.hpp"

namespace crest {

class Timeline {
 public:
  Timeline() = default;  // disabled: every call is a no-op
  // Collective (a barrier fixes the origin). `path` empty: disabled, and no collective.
  Timeline(Communicator& comm, std::string path, size_t max_events = 200000);

  bool enabled() const { return !path_.empty(); }
  static double now();  // steady_clock seconds, the clock of PendingCollective::Timing
  enum Row { compute = 0, communication = 1 };
  // A span [start, end) in steady_clock seconds; `args` is a JSON object text or empty.
  void span(const std::string& name, Row row, double start, double end,
            const std::string& args = "");

  // Collective: gathers every rank's events and writes the trace to the path (rank 0 writes).
  void write(Communicator& comm);

 private:
  std::string path_;
  double origin_ = 0;
  size_t max_events_ = 0;
  bool truncated_ = false;
  std::vector<std::string> events_;  // JSON objects without the pid (added at write time)
};

}  // namespace crest
