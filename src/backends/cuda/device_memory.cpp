// Device memory and the stream of the CUDA backend.
#include "cuda/device_memory.hpp"

#include <cstring>
#include <string>
#include <utility>

#include "cuda/check.hpp"
#include "cuda/cuda_kernels.hpp"

namespace crest::cuda {

// cudaMallocAsync's blocks are aligned to 256 bytes, which is what Buffer asks by default; a
// larger alignment would need padding no caller has needed yet.
constexpr size_t kDeviceAlignment = 256;

void* DeviceMemory::allocate(size_t bytes, size_t alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > kDeviceAlignment)
    throw_usage("cuda memory: alignment " + std::to_string(alignment) +
                " is not a power of two up to 256");
  if (bytes == 0) return nullptr;
  void* p = nullptr;
  const cudaError_t err = cudaMallocAsync(&p, bytes, context_->stream);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    size_t free = 0, total = 0;
    cudaMemGetInfo(&free, &total);
    throw_input("cuda memory: cannot allocate " + std::to_string(bytes) + " bytes on device " +
                std::to_string(context_->device) + " (" + std::to_string(free) + " of " +
                std::to_string(total) + " bytes free): use a smaller batch or sample");
  }
  CREST_CUDA(err);
  // Zero-filled, as the resource promises (a fresh arena or optimizer state starts at zero).
  CREST_CUDA(cudaMemsetAsync(p, 0, bytes, context_->stream));
  return p;
}

void DeviceMemory::deallocate(void* p, size_t /*bytes*/) {
  if (p) cudaFreeAsync(p, context_->stream);  // never throws: called from destructors
}

void DeviceMemory::copy_to_device(void* dst, const void* host_src, size_t bytes) {
  if (bytes == 0) return;
  CREST_CUDA(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, context_->stream));
  // Complete on return, so the host may reuse host_src at once (pageable memory is staged by the
  // driver; staging_memory()'s page-locked buffers are the fast path, docs/cuda.md).
  CREST_CUDA(cudaStreamSynchronize(context_->stream));
}

namespace {

// A copy on the copy stream, known by the event recorded after it. The events are the copy's
// own: it is waited for, or ordered before the compute stream, any number of times, and started
// again once waited for (DeviceMemory::start_copy_to_device's reuse).
class StreamCopy final : public PendingCopy {
 public:
  explicit StreamCopy(std::shared_ptr<Context> context) : context_(std::move(context)) {
    CREST_CUDA(cudaEventCreateWithFlags(&issued_, cudaEventDisableTiming));
    CREST_CUDA(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
  }
  StreamCopy(const StreamCopy&) = delete;
  StreamCopy& operator=(const StreamCopy&) = delete;
  ~StreamCopy() override {
    // The host source may be freed after this: wait for the copy (errors ignored in a destructor,
    // the next call on the stream reports them).
    cudaEventSynchronize(done_);
    cudaEventDestroy(done_);
    cudaEventDestroy(issued_);
  }

  // The compute stream's work issued so far (it may still read or write dst) before the copy.
  void start(void* dst, const void* host_src, size_t bytes) {
    CREST_CUDA(cudaEventRecord(issued_, context_->stream));
    CREST_CUDA(cudaStreamWaitEvent(context_->copy_stream, issued_, 0));
    CREST_CUDA(
        cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, context_->copy_stream));
    CREST_CUDA(cudaEventRecord(done_, context_->copy_stream));
  }
  void wait() override { CREST_CUDA(cudaEventSynchronize(done_)); }
  bool runs_on(const Context& context) const { return context_.get() == &context; }
  void order_before_stream() override {
    CREST_CUDA(cudaStreamWaitEvent(context_->stream, done_, 0));
  }

 private:
  std::shared_ptr<Context> context_;
  cudaEvent_t issued_ = nullptr, done_ = nullptr;
};

}  // namespace

// A copy given back is restarted: its events are recorded again (a stream already made to wait
// for the earlier record keeps waiting for that one), so staging a batch every step creates no
// events and allocates nothing.
std::unique_ptr<PendingCopy> DeviceMemory::start_copy_to_device(
    void* dst, const void* host_src, size_t bytes, std::unique_ptr<PendingCopy> reuse) {
  const auto* earlier = dynamic_cast<const StreamCopy*>(reuse.get());
  std::unique_ptr<StreamCopy> copy =
      earlier && earlier->runs_on(*context_)
          ? std::unique_ptr<StreamCopy>(static_cast<StreamCopy*>(reuse.release()))
          : std::make_unique<StreamCopy>(context_);
  if (bytes > 0) copy->start(dst, host_src, bytes);
  return copy;
}

void DeviceMemory::write_values(void* dst, const void* values, size_t bytes) {
  cuda::write_values(dst, values, bytes, context_->stream);
}

void DeviceMemory::copy_to_host(void* host_dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  CREST_CUDA(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, context_->stream));
  CREST_CUDA(cudaStreamSynchronize(context_->stream));
}

void DeviceMemory::copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0 || dst == src) return;
  CREST_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, context_->stream));
}

void DeviceMemory::memset(void* dst, int value, size_t bytes) {
  if (bytes == 0) return;
  CREST_CUDA(cudaMemsetAsync(dst, value, bytes, context_->stream));
}

// cudaHostAlloc's blocks are page aligned.
void* PinnedHostMemory::allocate(size_t bytes, size_t alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > 4096)
    throw_usage("pinned memory: alignment " + std::to_string(alignment) +
                " is not a power of two up to 4096");
  if (bytes == 0) return nullptr;
  void* p = nullptr;
  const cudaError_t err = cudaHostAlloc(&p, bytes, cudaHostAllocDefault);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    throw_input("pinned host memory: cannot lock " + std::to_string(bytes) +
                " bytes (ulimit -l, or the node's free memory)");
  }
  CREST_CUDA(err);
  std::memset(p, 0, bytes);  // zero-filled, as the resource promises
  return p;
}

void PinnedHostMemory::deallocate(void* p, size_t /*bytes*/) {
  if (p) cudaFreeHost(p);  // never throws: called from destructors
}

void PinnedHostMemory::copy_to_device(void* dst, const void* host_src, size_t bytes) {
  if (bytes) std::memcpy(dst, host_src, bytes);
}
void PinnedHostMemory::copy_to_host(void* host_dst, const void* src, size_t bytes) {
  if (bytes) std::memcpy(host_dst, src, bytes);
}
void PinnedHostMemory::copy(void* dst, const void* src, size_t bytes) {
  if (bytes && dst != src) std::memmove(dst, src, bytes);
}
void PinnedHostMemory::memset(void* dst, int value, size_t bytes) {
  if (bytes) std::memset(dst, value, bytes);
}

void DeviceStream::synchronize() { CREST_CUDA(cudaStreamSynchronize(context_->stream)); }

}  // namespace crest::cuda
