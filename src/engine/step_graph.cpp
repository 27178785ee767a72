#include "step_graph.hpp"

namespace crest {

StepGraph::Kept* StepGraph::kept_for_key() {
  for (Kept& kept : kept_)
    if (kept.recorded && kept.key == next_key_) return &kept;
  return nullptr;
}

// A slot for a new key: a new one while fewer than kGraphsKept are kept, else the least recently
// run one, whose graph the recording then updates in place. It is no key's until the recording
// ends (an interrupted recording leaves nothing to launch again).
StepGraph::Kept& StepGraph::slot_for_key() {
  if (kept_.size() < kGraphsKept) {
    kept_.emplace_back();
    return kept_.back();
  }
  Kept* oldest = &kept_.front();
  for (Kept& kept : kept_)
    if (kept.last_run < oldest->last_run) oldest = &kept;
  oldest->recorded = false;
  return *oldest;
}

void StepGraph::launch_again(Kept& kept) {
  kept.graph->launch();
  kept.last_run = runs_;
  ++replayed_;
}

// Ends a recording that an exception interrupted, so the stream runs its work again; the
// partial graph is dropped (its own errors too: the first exception is the one to report).
void StepGraph::abandon_recording() {
  try {
    std::unique_ptr<StreamGraph> partial;
    stream_.end_capture(partial);
  } catch (...) {  // NOLINT(bugprone-empty-catch): the interrupting error is reported instead
  }
}

void StepGraph::launch_recording(Kept& slot) {
  stream_.end_capture(slot.graph);
  slot.key = next_key_;
  slot.recorded = true;
  slot.last_run = runs_;
  ++recorded_;
  slot.graph->launch();
}

}  // namespace crest
