// Host access to model memory (crest/core/host_staging.hpp).
#include "crest/core/host_staging.hpp"

#include "crest/core/error.hpp"

namespace crest {

HostStaging::HostStaging(MemoryResource& memory, void* data, size_t bytes, bool fetch)
    : memory_(memory), target_(data), bytes_(bytes), writable_(true), host_(data) {
  if (memory.is_host()) return;
  copy_ = Buffer(bytes);
  host_ = copy_.data();
  if (fetch) memory.copy_to_host(host_, data, bytes);
}

HostStaging::HostStaging(MemoryResource& memory, const void* data, size_t bytes)
    : HostStaging(memory, const_cast<void*>(data), bytes, true) {
  writable_ = false;
}

void HostStaging::commit() {
  CREST_CHECK(writable_, "commit() of a read-only host staging");
  if (host_ != target_) memory_.copy_to_device(target_, host_, bytes_);
}

TensorView host_readable(MemoryResource& memory, const TensorView& t,
                         std::vector<std::byte>& storage) {
  if (memory.is_host()) return t;
  storage.resize(t.bytes());
  memory.copy_to_host(storage.data(), t.data(), t.bytes());
  return TensorView(storage.data(), t.desc());
}

}  // namespace crest
