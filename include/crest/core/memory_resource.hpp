// Where model memory lives and how bytes move in and out of it. Every backend owns one: the CPU
// backends share the host resource below, a device backend (CUDA) allocates device memory. Code
// outside the backends never dereferences memory it got from a resource that is not is_host():
// it copies through copy_to_host / copy_to_device (a staging buffer) instead.
//
// It lives in core, not in backends, because Buffer (the one owner of planned memory) allocates
// through it.
#pragma once
#include <cstddef>
#include <memory>

namespace crest {

// A copy into a resource's memory that may still be running (MemoryResource::start_copy_to_device).
// Destroying it waits for the copy.
class PendingCopy {
 public:
  virtual ~PendingCopy() = default;
  // Returns once the copy is done: its host source may then change or be freed.
  virtual void wait() = 0;
  // The work issued on the owning backend's stream from now on runs after the copy; the host
  // does not wait.
  virtual void order_before_stream() = 0;
};

class MemoryResource {
 public:
  virtual ~MemoryResource() = default;
  // Zero-filled memory of `bytes` bytes aligned to `alignment` (a power of two); nullptr for 0
  // bytes. Throws std::bad_alloc when out of memory, crest::Error (usage) on a bad alignment.
  virtual void* allocate(size_t bytes, size_t alignment) = 0;
  // Returns what allocate(bytes, ...) gave; `bytes` is the size asked for then. nullptr is a no-op.
  virtual void deallocate(void* p, size_t bytes) = 0;
  // Host memory <-> this resource's memory, ordered after the work issued before on the owning
  // backend's stream and complete when they return: the host side may be reused or read at once.
  virtual void copy_to_device(void* dst, const void* host_src, size_t bytes) = 0;
  virtual void copy_to_host(void* host_dst, const void* src, size_t bytes) = 0;
  // Within this resource's memory.
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;
  virtual void memset(void* dst, int value, size_t bytes) = 0;
  // True when the host may read and write this memory directly (then the copies are memcpy, and
  // a caller may skip them: a data loader's host batch is bound in place).
  virtual bool is_host() const = 0;
  // Host memory this resource copies to and from fastest: page-locked memory for a GPU (the copy
  // runs at the link's speed, without the driver's bounce buffer), host_memory() by default. For
  // host buffers staged to the device again and again (each step's batch).
  virtual MemoryResource& staging_memory();
  // Starts copying host memory into this resource's memory after the work issued before on the
  // owning backend's stream, without making the host or that stream wait: on a GPU a queue of
  // its own runs it while the stream computes (the next step's batch during this one). The host
  // side must stay unchanged until the copy is waited for, and the stream must be ordered after
  // it (PendingCopy::order_before_stream) before work that reads `dst`. Fastest from
  // staging_memory(). By default the copy is copy_to_device's, done on return.
  // `reuse`: null, or a copy this resource started before that has been waited for; the new copy
  // takes its place (on a GPU its events), so a copy every step allocates nothing.
  virtual std::unique_ptr<PendingCopy> start_copy_to_device(void* dst, const void* host_src,
                                                            size_t bytes,
                                                            std::unique_ptr<PendingCopy> reuse);
  // Writes `bytes` (at most kMaxWrittenValues) host bytes into this resource's memory in the
  // stream's order, waiting for nothing: on a GPU a one-thread kernel that takes them as its
  // argument, so `values` may change at once and a recorded step (a CUDA graph) holds them as
  // that kernel's argument. For the few values a step sets (StagedValues). By default
  // copy_to_device's. A usage error above the limit.
  static constexpr size_t kMaxWrittenValues = 64;
  virtual void write_values(void* dst, const void* values, size_t bytes);
};

// The process's host memory: zeroed, aligned, large blocks straight from mmap. Shared by the CPU
// backends and the default for Buffers that are host-side by nature (loader batches, staging).
MemoryResource& host_memory();

}  // namespace crest
