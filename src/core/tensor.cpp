#include "crest/core/tensor.hpp"

#include <new>
#include <utility>

#include "crest/core/error.hpp"
#include "crest/core/units.hpp"

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

Buffer named_buffer(const std::string& what, size_t bytes, MemoryResource& memory,
                    size_t alignment) {
  const std::string needs = what + " (" + human_bytes(static_cast<double>(bytes)) + "): ";
  try {
    return Buffer(bytes, alignment, memory);
  } catch (const std::bad_alloc&) {
    throw_input(needs + "out of host memory");
  } catch (const Error& e) {
    throw Error(e.kind(), needs + e.what(), e.scope());
  }
}

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
