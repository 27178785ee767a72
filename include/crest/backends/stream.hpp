// The order in which a backend runs its work. Kernels, vector ops and memory-resource copies
// within the backend are issued in program order on its stream; synchronize() returns once all
// of it is done, so the host may then read results it copied out or time a step honestly.
// CPU backends run everything before returning, so theirs is a no-op; a CUDA backend wraps a
// cudaStream_t.
#pragma once

namespace crest {

class Stream {
 public:
  virtual ~Stream() = default;
  virtual void synchronize() = 0;
};

// The stream of backends that finish each call before returning (reference, onednn).
class HostStream final : public Stream {
 public:
  void synchronize() override {}
};

}  // namespace crest
