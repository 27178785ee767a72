#include "crest/core/tensor.hpp"

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

Buffer::Buffer(size_t bytes, size_t alignment, MemoryResource& memory)
    : data_(memory.allocate(bytes, alignment)), bytes_(bytes), memory_(&memory) {}

Buffer::~Buffer() { release(); }

void Buffer::release() {
  memory_->deallocate(data_, bytes_);
  data_ = nullptr;
}

Buffer::Buffer(Buffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)),
      bytes_(std::exchange(o.bytes_, 0)),
      memory_(o.memory_) {}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    release();
    data_ = std::exchange(o.data_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    memory_ = o.memory_;
  }
  return *this;
}

}  // namespace crest
