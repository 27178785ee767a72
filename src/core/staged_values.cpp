#include "crest/core/staged_values.hpp"

#include <cstring>

namespace crest {

StagedBytes::StagedBytes(size_t bytes, MemoryResource& memory) : target_(bytes, 256, memory) {}

void StagedBytes::set(const void* values) {
  if (target_.memory().is_host())
    std::memcpy(target_.data(), values, target_.bytes());
  else
    target_.memory().write_values(target_.data(), values, target_.bytes());
}

}  // namespace crest
