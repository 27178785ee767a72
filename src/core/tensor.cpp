#include "crest/core/tensor.hpp"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace crest {

const char* device_name(Device d) { return d == Device::cpu ? "cpu" : "cuda"; }

const char* layout_name(Layout l) {
  switch (l) {
    case Layout::plain:
      return "plain";
    case Layout::channels_last:
      return "channels_last";
    case Layout::blocked:
      return "blocked";
  }
  return "?";
}

namespace {
// Large buffers come straight from the kernel: zero-filled, page-aligned, and untouched pages
// cost nothing until used (a dry run can plan a 128^3 model without paging in gigabytes).
constexpr size_t kMmapThreshold = size_t{1} << 20;
}  // namespace

Buffer::Buffer(size_t bytes, size_t alignment) : bytes_(bytes) {
  if (bytes == 0) return;
  if (bytes >= kMmapThreshold && alignment <= 4096) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    data_ = p;
    return;
  }
  data_ = std::aligned_alloc(alignment, align_up(bytes, alignment));
  if (!data_) throw std::bad_alloc();
  std::memset(data_, 0, align_up(bytes, alignment));
}

Buffer::~Buffer() { release(); }

void Buffer::release() {
  if (!data_) return;
  if (bytes_ >= kMmapThreshold)
    munmap(data_, bytes_);
  else
    std::free(data_);
  data_ = nullptr;
}

Buffer::Buffer(Buffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    release();
    data_ = std::exchange(o.data_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

}  // namespace crest
