#include "crest/core/tensor.hpp"

#include <cstdlib>
#include <new>
#include <utility>

namespace crest {

const char* device_name(Device d) { return d == Device::cpu ? "cpu" : "cuda"; }

const char* layout_name(Layout l) {
  switch (l) {
    case Layout::plain: return "plain";
    case Layout::channels_last: return "channels_last";
    case Layout::blocked: return "blocked";
  }
  return "?";
}

Buffer::Buffer(size_t bytes, size_t alignment) : bytes_(bytes) {
  if (bytes == 0) return;
  data_ = std::aligned_alloc(alignment, align_up(bytes, alignment));
  if (!data_) throw std::bad_alloc();
}

Buffer::~Buffer() { std::free(data_); }

Buffer::Buffer(Buffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    std::free(data_);
    data_ = std::exchange(o.data_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

}  // namespace crest
