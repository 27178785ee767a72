// A training step's passes (forward, backward) recorded as one graph of the backend's stream and
// launched at once (crest.cuda_graphs): a device then runs the step's hundreds of kernels back
// to back instead of waiting for each launch. Each step records again (cheaper than launching:
// nothing runs) and updates the graph in place, so every piece of host bookkeeping the passes
// do still runs each step, and a kernel argument that changed (a new loss scale) is taken over;
// the passes hand their kernels the same arguments every step (the dropout counter, the staged
// optimizer values), so the update changes nothing else. Private to the engine (TrainStep).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>

#include "crest/backends/stream.hpp"

namespace crest {

class PassGraph {
 public:
  explicit PassGraph(Stream& stream) : stream_(stream) {}
  // Runs `passes`: the first time as they queue their work (kernels set themselves up on first
  // use: algorithm searches, workspaces, which a recording cannot hold), then recorded and
  // launched. An exception inside a recording ends it (nothing recorded runs) and propagates.
  void run(const std::function<void()>& passes);
  // Steps whose passes were recorded, and whether a graph exists (for the tests).
  int64_t recorded() const { return recorded_; }

 private:
  Stream& stream_;
  std::unique_ptr<StreamGraph> graph_;
  int64_t runs_ = 0, recorded_ = 0;
};

}  // namespace crest
