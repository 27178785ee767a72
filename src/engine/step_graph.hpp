// A part of a training step (its passes: forward and backward; its update) recorded as one graph
// of the backend's stream and launched again on later steps (crest.cuda_graphs): a device then
// runs the part's hundreds of kernels back to back, and the host queues none of them. A
// recording is launched again only where its key is the step's: the key holds every host value
// the part's kernels take as arguments (the inputs' addresses, the loss scale, the sideband's
// flags); everything else they read lives at fixed addresses in the backend's memory (the update's
// rate and step count, the dropout counter, the weights). The part's host bookkeeping runs
// outside it, every step (the caller's). A new key is recorded, into a graph of its own while
// fewer than kGraphsKept are kept, else into the least recently run one, updated in place. Private
// to the engine (TrainStep).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "crest/backends/stream.hpp"

namespace crest {

class StepGraph {
 public:
  // Two batch buffers alternate (BatchFeed), times a change of the loss scale or the flags.
  static constexpr size_t kGraphsKept = 4;

  explicit StepGraph(Stream& stream) : stream_(stream) { kept_.reserve(kGraphsKept); }
  // The key of the next run(), cleared for the caller to fill (its capacity kept: no allocation
  // once it has its size).
  std::vector<uint64_t>& next_key() {
    next_key_.clear();
    return next_key_;
  }
  // Runs `work`, which must queue the same kernels with the same arguments whenever the key is
  // the same and change no host state: the first time as it queues (kernels set themselves up on
  // first use: algorithm searches, workspaces, which a recording cannot hold); then, for a key
  // recorded before, that recording launched again; else recorded and launched. An exception
  // inside a recording ends it (nothing recorded runs, nothing kept) and propagates. A
  // template, so a step hands its work over without allocating.
  template <typename Work>
  void run(Work&& work) {
    if (runs_++ == 0) return work();
    if (Kept* kept = kept_for_key()) {
      launch_again(*kept);
      // A stream whose recording ran the work at once (the pretend device) runs it again.
      if (!stream_.replays_recordings()) work();
      return;
    }
    Kept& slot = slot_for_key();
    stream_.begin_capture();
    try {
      work();
    } catch (...) {
      abandon_recording();
      throw;
    }
    launch_recording(slot);
  }
  // How many times `work` was recorded, and how many times a recording was launched again.
  int64_t recorded() const { return recorded_; }
  int64_t replayed() const { return replayed_; }

 private:
  struct Kept {
    std::vector<uint64_t> key;
    std::unique_ptr<StreamGraph> graph;
    bool recorded = false;  // whether `graph` is `key`'s recording
    int64_t last_run = 0;
  };
  Kept* kept_for_key();
  Kept& slot_for_key();
  void launch_again(Kept& kept);
  void abandon_recording();
  void launch_recording(Kept& slot);

  Stream& stream_;
  std::vector<Kept> kept_;
  std::vector<uint64_t> next_key_;
  int64_t runs_ = 0, recorded_ = 0, replayed_ = 0;
};

}  // namespace crest
