// Host access to a tensor of any backend's memory, for tests that compare values: a view of the
// tensor itself where its memory is host memory, else of a copy (HostStaging). Writing goes
// through write_host(), which commits the host values back.
#pragma once
#include <functional>

#include "crest/core/host_staging.hpp"
#include "crest/core/tensor.hpp"

namespace crest::test {

class HostCopy {
 public:
  HostCopy(MemoryResource& memory, const TensorView& v)
      : staging_(memory, static_cast<const void*>(v.data()), v.bytes()),
        view_(staging_.data(), v.desc()) {}
  const TensorView& view() const { return view_; }

 private:
  HostStaging staging_;
  TensorView view_;
};

// Calls fill(host view) on a host image of `v` (fetched first) and makes `v` hold what it wrote.
inline void write_host(MemoryResource& memory, const TensorView& v,
                       const std::function<void(const TensorView&)>& fill) {
  HostStaging staging(memory, v.data(), v.bytes());
  fill(TensorView(staging.data(), v.desc()));
  staging.commit();
}

}  // namespace crest::test
