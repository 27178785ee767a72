#include "step_graph.hpp"

namespace crest {

namespace {

// Ends a recording that an exception interrupted, so the stream runs its work again; the
// partial graph is dropped (its own errors too: the first exception is the one to report).
void abandon_recording(Stream& stream) {
  try {
    std::unique_ptr<StreamGraph> partial;
    stream.end_capture(partial);
  } catch (...) {  // NOLINT(bugprone-empty-catch): the interrupting error is reported instead
  }
}

}  // namespace

void StepGraph::run(const std::function<void()>& work) {
  if (runs_++ == 0) return work();
  stream_.begin_capture();
  try {
    work();
  } catch (...) {
    abandon_recording(stream_);
    throw;
  }
  stream_.end_capture(graph_);
  ++recorded_;
  graph_->launch();
}

}  // namespace crest
