#include "crest/core/staged_values.hpp"

#include <cstring>
#include <utility>

namespace crest {

StagedBytes::StagedBytes(size_t bytes, MemoryResource& memory) : target_(bytes, 256, memory) {
  if (!memory.is_host()) staged_ = Buffer(bytes, 256, memory.staging_memory());
}

void StagedBytes::set(const void* values) {
  if (target_.memory().is_host()) {
    std::memcpy(target_.data(), values, target_.bytes());
    return;
  }
  // The last copy may still be reading the staging bytes (on a GPU: queued behind the step).
  if (copy_) copy_->wait();
  std::memcpy(staged_.data(), values, staged_.bytes());
  copy_ = target_.memory().start_copy_to_device(target_.data(), staged_.data(), target_.bytes(),
                                                std::move(copy_));
  copy_->order_before_stream();
}

}  // namespace crest
