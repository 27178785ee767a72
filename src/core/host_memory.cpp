// The host memory resource (crest/core/memory_resource.hpp).
#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "crest/core/error.hpp"
#include "crest/core/memory_resource.hpp"
#include "crest/core/tensor.hpp"

namespace crest {
namespace {

// Large blocks come straight from the kernel: zero-filled, page-aligned, and untouched pages
// cost nothing until used (a dry run can plan a 128^3 model without paging in gigabytes). They
// start on a 2 MB boundary with MADV_HUGEPAGE, so the arena, the parameters, their gradients and
// the optimizer state can sit on transparent huge pages: the streaming passes over them (the
// optimizer, the weight bridges) miss the TLB far less. DeepCAM 192x288 bf16, interleaved, best
// of 5: step 0.384 -> 0.377 s, LAMB update 33.6 -> 30.3 ms.
constexpr size_t kMmapThreshold = size_t{1} << 20;
constexpr size_t kPage = 4096;

constexpr size_t kHugePage = size_t{2} << 20;

// `bytes` of fresh pages starting on a 2 MB boundary, which the kernel may back with transparent
// huge pages (MADV_HUGEPAGE: Debian's default THP mode is madvise). Mapped 2 MB too long, then the
// ends trimmed, so munmap(p, bytes) releases exactly the block.
void* map_huge_aligned(size_t bytes) {
  const size_t length = bytes + kHugePage;
  void* mapped = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED) throw std::bad_alloc();
  char* raw = static_cast<char*>(mapped);
  const size_t head = (kHugePage - reinterpret_cast<uintptr_t>(raw) % kHugePage) % kHugePage;
  char* p = raw + head;
  char* end = p + align_up(bytes, kPage);
  if (head > 0) munmap(raw, head);
  munmap(end, static_cast<size_t>(raw + length - end));  // never empty: head < 2 MB
  madvise(p, bytes, MADV_HUGEPAGE);  // advice only: without THP the pages are simply 4 KB
  return p;
}

class HostMemory final : public MemoryResource {
 public:
  void* allocate(size_t bytes, size_t alignment) override {
    if (alignment == 0 || (alignment & (alignment - 1)) != 0)
      throw_usage("memory alignment must be a power of two, got " + std::to_string(alignment));
    if (bytes == 0) return nullptr;
    if (bytes >= kMmapThreshold) {
      if (alignment > kPage)
        throw_usage("host memory aligns large blocks to at most " + std::to_string(kPage) +
                    " bytes, asked for " + std::to_string(alignment));
      return map_huge_aligned(bytes);
    }
    void* p = std::aligned_alloc(alignment, align_up(bytes, alignment));
    if (!p) throw std::bad_alloc();
    std::memset(p, 0, align_up(bytes, alignment));
    return p;
  }

  void deallocate(void* p, size_t bytes) override {
    if (!p) return;
    if (bytes >= kMmapThreshold)
      munmap(p, bytes);
    else
      std::free(p);
  }

  void copy_to_device(void* dst, const void* host_src, size_t bytes) override {
    copy(dst, host_src, bytes);
  }
  void copy_to_host(void* host_dst, const void* src, size_t bytes) override {
    copy(host_dst, src, bytes);
  }
  // memmove: callers may copy a slice onto an overlapping one; the cost is the same.
  void copy(void* dst, const void* src, size_t bytes) override {
    if (bytes && dst != src) std::memmove(dst, src, bytes);
  }
  void memset(void* dst, int value, size_t bytes) override {
    if (bytes) std::memset(dst, value, bytes);
  }
  bool is_host() const override { return true; }
};

}  // namespace

MemoryResource& host_memory() {
  static HostMemory memory;
  return memory;
}

MemoryResource& MemoryResource::staging_memory() { return host_memory(); }

namespace {

// A copy that finished before it was handed out.
class DoneCopy final : public PendingCopy {
 public:
  void wait() override {}
  void order_before_stream() override {}
};

}  // namespace

void MemoryResource::write_values(void* dst, const void* values, size_t bytes) {
  if (bytes > kMaxWrittenValues)
    throw_usage("write_values writes at most " + std::to_string(kMaxWrittenValues) +
                " bytes, got " + std::to_string(bytes));
  copy_to_device(dst, values, bytes);
}

// A copy given back for reuse was started here: one of these, whose state is always "done".
std::unique_ptr<PendingCopy> MemoryResource::start_copy_to_device(
    void* dst, const void* host_src, size_t bytes, std::unique_ptr<PendingCopy> reuse) {
  copy_to_device(dst, host_src, bytes);
  return reuse ? std::move(reuse) : std::make_unique<DoneCopy>();
}

}  // namespace crest
