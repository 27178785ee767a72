#include "step_graph.hpp"

namespace crest {

// Ends a recording that an exception interrupted, so the stream runs its work again; the
// partial graph is dropped (its own errors too: the first exception is the one to report).
void StepGraph::abandon_recording() {
  try {
    std::unique_ptr<StreamGraph> partial;
    stream_.end_capture(partial);
  } catch (...) {  // NOLINT(bugprone-empty-catch): the interrupting error is reported instead
  }
}

void StepGraph::launch_recording() {
  stream_.end_capture(graph_);
  ++recorded_;
  graph_->launch();
}

}  // namespace crest
