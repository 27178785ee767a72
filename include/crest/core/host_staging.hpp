// Host access to a range of model memory, for the code that must read or write it on the host
// (initialisation, weight files, checkpoints, MPI). On host memory it is the range itself: no
// copy, so the CPU backends pay nothing. Elsewhere it is a host copy: filled by copy_to_host when
// asked to fetch, written back by commit().
#pragma once
#include <cstddef>
#include <vector>

#include "crest/core/memory_resource.hpp"
#include "crest/core/tensor.hpp"

namespace crest {

class HostStaging {
 public:
  // Read and write `bytes` at `data` (memory from `memory`). `fetch`: start from the current
  // contents; false when the caller overwrites every byte it commits.
  HostStaging(MemoryResource& memory, void* data, size_t bytes, bool fetch = true);
  // Read only: commit() is refused.
  HostStaging(MemoryResource& memory, const void* data, size_t bytes);
  HostStaging(HostStaging&&) noexcept = default;
  HostStaging(const HostStaging&) = delete;
  HostStaging& operator=(const HostStaging&) = delete;
  HostStaging& operator=(HostStaging&&) = delete;

  void* data() const { return host_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(host_);
  }
  size_t bytes() const { return bytes_; }
  // Makes the host view the memory's contents (copy_to_device); a no-op on host memory.
  void commit();

 private:
  MemoryResource& memory_;
  void* target_;
  size_t bytes_;
  bool writable_;
  Buffer copy_;  // empty on host memory
  void* host_;
};

// `t` (in `memory`) where host code reads it: `t` itself on host memory, elsewhere a copy in
// `storage` (resized to it), valid until `storage` changes.
TensorView host_readable(MemoryResource& memory, const TensorView& t,
                         std::vector<std::byte>& storage);

}  // namespace crest
