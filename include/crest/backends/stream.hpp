// The order in which a backend runs its work. Kernels, vector ops and memory-resource copies
// within the backend are issued in program order on its stream; synchronize() returns once all
// of it is done, so the host may then read results it copied out or time a step honestly.
// CPU backends run everything before returning, so theirs is a no-op; a CUDA backend wraps a
// cudaStream_t.
#pragma once
#include <memory>

namespace crest {

// A stream's work recorded between Stream::begin_capture and end_capture, run as one launch (a
// CUDA graph).
class StreamGraph {
 public:
  virtual ~StreamGraph() = default;
  // Queues the recorded work on the stream, after what was queued before.
  virtual void launch() = 0;
};

class Stream {
 public:
  virtual ~Stream() = default;
  virtual void synchronize() = 0;
  // Whether this stream can record its work instead of running it (begin_capture); false on the
  // host backends, whose calls run before they return.
  virtual bool captures() const { return false; }
  // Whether a launched StreamGraph runs its recorded work again by itself (a GPU's: the work
  // was recorded, not run). False where a recording ran its work at once (the tests' pretend
  // device), so the work must be called again to run again.
  virtual bool replays_recordings() const { return false; }
  // From here to end_capture the work queued on the stream is recorded, not run. Nothing in
  // between may wait for the stream (a read of device memory, synchronize): that ends the
  // recording with an error. A usage error where captures() is false.
  virtual void begin_capture();
  // Ends the recording. `graph`: null, or what an earlier end_capture made, which the new
  // recording then updates in place (cheaper than a new graph; a new one where the work's shape
  // changed). None of the recorded work has run: launch it.
  virtual void end_capture(std::unique_ptr<StreamGraph>& graph);
};

// The stream of backends that finish each call before returning (reference, onednn).
class HostStream final : public Stream {
 public:
  void synchronize() override {}
};

}  // namespace crest
