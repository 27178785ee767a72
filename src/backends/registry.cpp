// Backend registry: the one place that knows which backends exist.
#include "backends/onednn/onednn_backend.hpp"
#include "backends/reference/reference_backend.hpp"
#include "crest/core/error.hpp"

namespace crest {

std::vector<std::string> backend_names() { return {"reference", "onednn"}; }

std::unique_ptr<Backend> make_backend(const std::string& name) {
  if (name == "reference") return make_reference_backend();
  if (name == "onednn") return make_onednn_backend();
  throw_usage("unknown backend '" + name + "' (available: reference, onednn)");
}

}  // namespace crest
