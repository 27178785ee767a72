// A few values the host sets once per step for kernels that read them where they run (an
// optimizer's rate and step count). They live in a backend's memory at one address, so the
// kernels take the same arguments every step and a captured step (a CUDA graph) replays with the
// values of the step it runs as, not those it was captured with.
#pragma once
#include <cstddef>
#include <memory>
#include <type_traits>

#include "crest/core/memory_resource.hpp"
#include "crest/core/tensor.hpp"

namespace crest {

// `bytes` bytes in a resource's memory, rewritten by the host. On host memory set() writes them
// in place. Elsewhere it writes a staging copy (staging_memory(): page-locked on a GPU) and starts
// one copy into the resource's memory, ordered before the stream's next work; the staging copy
// is rewritten only once the previous copy has run. The staging address never changes: a
// captured copy reads whatever the host last wrote there.
class StagedBytes {
 public:
  StagedBytes() = default;
  StagedBytes(size_t bytes, MemoryResource& memory);
  void set(const void* values);
  const void* data() const { return target_.data(); }

 private:
  Buffer target_;  // in the resource's memory
  Buffer staged_;  // empty on host memory
  std::unique_ptr<PendingCopy> copy_;
};

template <typename T>
class StagedValues {
  static_assert(std::is_trivially_copyable_v<T>, "the values are copied as bytes");

 public:
  StagedValues() = default;
  explicit StagedValues(MemoryResource& memory) : bytes_(sizeof(T), memory) {}
  // Sets the values and returns where the kernels read them.
  const T* set(const T& values) {
    bytes_.set(&values);
    return get();
  }
  const T* get() const { return static_cast<const T*>(bytes_.data()); }

 private:
  StagedBytes bytes_;
};

}  // namespace crest
