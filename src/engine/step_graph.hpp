// A part of a training step (its passes: forward and backward; its update) recorded as one graph
// of the backend's stream and launched at once (crest.cuda_graphs): a device then runs the part's
// hundreds of kernels back to back instead of waiting for each launch. Each step records again
// (cheaper than launching: nothing runs) and updates the graph in place, so every piece of host
// bookkeeping the part does still runs each step, and a kernel argument that changed (a new loss
// scale, the update's values as their store's argument) is taken over. Private to the engine
// (TrainStep).
#pragma once
#include <cstdint>
#include <memory>

#include "crest/backends/stream.hpp"

namespace crest {

class StepGraph {
 public:
  explicit StepGraph(Stream& stream) : stream_(stream) {}
  // Runs `work`: the first time as it queues (kernels set themselves up on first use: algorithm
  // searches, workspaces, which a recording cannot hold), then recorded and launched. An
  // exception inside a recording ends it (nothing recorded runs) and propagates. A template, so
  // a step hands its work over without allocating.
  template <typename Work>
  void run(Work&& work) {
    if (runs_++ == 0) return work();
    stream_.begin_capture();
    try {
      work();
    } catch (...) {
      abandon_recording();
      throw;
    }
    launch_recording();
  }
  // How many times `work` was recorded.
  int64_t recorded() const { return recorded_; }

 private:
  void abandon_recording();
  void launch_recording();

  Stream& stream_;
  std::unique_ptr<StreamGraph> graph_;
  int64_t runs_ = 0, recorded_ = 0;
};

}  // namespace crest
