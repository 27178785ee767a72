#include "crest/engine/saved_state.hpp"

#include "crest/engine/whole_parts.hpp"

namespace crest {

std::vector<std::string> ProcessSavedState::optimizer_states() const {
  return checkpoint_file::state_names(optimizer_);
}

void ProcessSavedState::provide(
    bool with_optimizer, const std::function<void(const checkpoint_file::StateBytes&)>& write) {
  const ParamStore& params = ex_.params();
  Optimizer* optimizer = with_optimizer ? &optimizer_ : nullptr;
  // Every rank is here: a spatially split dense head's parts are gathered onto the writer.
  const WholeParts wholes = params.divided() ? WholeParts(params, optimizer) : WholeParts();
  if (writer_) checkpoint_file::with_host_bytes(params, optimizer, wholes, write);
}

}  // namespace crest
