// The backends whose memory the host reads directly: the ones a test may compare by reading
// tensor views (ex.output(...).as<float>()). A device backend (cuda) is compared by its own tests,
// which copy through its memory resource (tests/backend/cuda_*_test.cpp); on a GPU machine it is
// among backend_names() and must not reach a test that dereferences device pointers.
#pragma once
#include <string>
#include <vector>

#include "crest/backends/kernels.hpp"

namespace crest::test {

inline std::vector<std::string> host_backend_names() {
  std::vector<std::string> names;
  for (const std::string& name : backend_names())
    if (make_backend(name)->memory().is_host()) names.push_back(name);
  return names;
}

}  // namespace crest::test
