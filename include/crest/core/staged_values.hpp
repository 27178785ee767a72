// A few values the host sets once per step for kernels that read them where they run (an
// optimizer's rate and step count). They live in a backend's memory at one address, so the
// kernels take the same arguments every step.
#pragma once
#include <cstddef>
#include <type_traits>

#include "crest/core/memory_resource.hpp"
#include "crest/core/tensor.hpp"

namespace crest {

// `bytes` bytes in a resource's memory, rewritten by the host: in place on host memory, else by
// MemoryResource::write_values (on a GPU a one-thread kernel that takes the bytes as its
// argument: queued in the stream's order, nothing waits, and a recorded step holds the values as
// that kernel's argument).
class StagedBytes {
 public:
  StagedBytes() = default;
  StagedBytes(size_t bytes, MemoryResource& memory);
  void set(const void* values);
  const void* data() const { return target_.data(); }

 private:
  Buffer target_;  // in the resource's memory
};

template <typename T>
class StagedValues {
  static_assert(std::is_trivially_copyable_v<T>, "the values are copied as bytes");
  static_assert(sizeof(T) <= MemoryResource::kMaxWrittenValues, "a few values, not a buffer");

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
