// Private to the CUDA backend: device memory taken in the stream's order (cudaMallocAsync from
// the device's default pool, so freed blocks are reused without a device-wide synchronisation)
// and the stream everything runs on.
#pragma once
#include <memory>

#include "crest/backends/stream.hpp"
#include "crest/core/memory_resource.hpp"
#include "cuda/context.hpp"

namespace crest::cuda {

// Page-locked host memory (cudaHostAlloc): the staging memory of DeviceMemory, which copies
// from it at the link's speed.
class PinnedHostMemory final : public MemoryResource {
 public:
  void* allocate(size_t bytes, size_t alignment) override;
  void deallocate(void* p, size_t bytes) override;
  void copy_to_device(void* dst, const void* host_src, size_t bytes) override;
  void copy_to_host(void* host_dst, const void* src, size_t bytes) override;
  void copy(void* dst, const void* src, size_t bytes) override;
  void memset(void* dst, int value, size_t bytes) override;
  bool is_host() const override { return true; }
};

class DeviceMemory final : public MemoryResource {
 public:
  explicit DeviceMemory(std::shared_ptr<Context> context) : context_(std::move(context)) {}
  void* allocate(size_t bytes, size_t alignment) override;
  void deallocate(void* p, size_t bytes) override;
  void copy_to_device(void* dst, const void* host_src, size_t bytes) override;
  void copy_to_host(void* host_dst, const void* src, size_t bytes) override;
  void copy(void* dst, const void* src, size_t bytes) override;
  void memset(void* dst, int value, size_t bytes) override;
  bool is_host() const override { return false; }
  MemoryResource& staging_memory() override { return pinned_; }
  // On the context's copy stream, after the compute stream's work so far (an event between them).
  std::unique_ptr<PendingCopy> start_copy_to_device(void* dst, const void* host_src, size_t bytes,
                                                    std::unique_ptr<PendingCopy> reuse) override;
  // A one-thread kernel on the stream with the bytes as its argument (store_values.cu).
  void write_values(void* dst, const void* values, size_t bytes) override;

 private:
  std::shared_ptr<Context> context_;
  PinnedHostMemory pinned_;
};

class DeviceStream final : public Stream {
 public:
  explicit DeviceStream(std::shared_ptr<Context> context) : context_(std::move(context)) {}
  void synchronize() override;
  // CUDA graphs (stream_graph.cpp).
  bool captures() const override { return true; }
  bool replays_recordings() const override { return true; }
  void begin_capture() override;
  void end_capture(std::unique_ptr<StreamGraph>& graph) override;

 private:
  std::shared_ptr<Context> context_;
};

}  // namespace crest::cuda
