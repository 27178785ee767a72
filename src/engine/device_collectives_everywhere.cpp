#include "crest/engine/device_collectives_everywhere.hpp"

#include <cstdint>

namespace crest {

std::unique_ptr<DeviceCollectives> device_collectives_everywhere(Communicator& comm,
                                                                 Backend& backend,
                                                                 std::string& why_not) {
  const Support here = backend.supports_device_collectives();
  int64_t missing = here ? 0 : 1;
  comm.allreduce_sum(&missing, 1);
  if (missing > 0) {
    why_not = here ? std::to_string(missing) + " of " + std::to_string(comm.size()) +
                         " ranks cannot make " + backend.name() + "'s collectives"
                   : here.reason;
    return nullptr;
  }
  auto share = [&comm](void* data, size_t bytes) { comm.broadcast(data, bytes, 0); };
  return backend.device_collectives(comm.rank(), comm.size(), share);
}

}  // namespace crest
