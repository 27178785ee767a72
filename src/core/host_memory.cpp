// The host memory resource (crest/core/memory_resource.hpp).
#include <sys/mman.h>

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
// cost nothing until used (a dry run can plan a 128^3 model without paging in gigabytes).
constexpr size_t kMmapThreshold = size_t{1} << 20;
constexpr size_t kPage = 4096;

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
      void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) throw std::bad_alloc();
      return p;
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

}  // namespace crest
