// The backend's own collectives (NCCL on the cuda backend) for every rank of a communicator, made
// only where every rank can make them: making them is collective (NCCL's initialisation waits
// for every rank), so one rank without the library must not leave the others waiting. The
// gradient exchange reduces its buckets with them where the parameters live on a device
// (make_gradient_sync), and `crest bench allreduce --backend` measures them.
#pragma once
#include <memory>
#include <string>

#include "crest/backends/kernels.hpp"
#include "crest/core/device_collectives.hpp"
#include "crest/dist/communicator.hpp"

namespace crest {

// Collective over `comm`: every rank asks its backend (Backend::supports_device_collectives),
// the ranks agree, and all make them (rank 0's bootstrap shared over `comm`), or none does: then
// null, and `why_not` says why ("2 of 4 ranks cannot make cuda's collectives", or this rank's
// reason when it is the only one).
std::unique_ptr<DeviceCollectives> device_collectives_everywhere(Communicator& comm,
                                                                 Backend& backend,
                                                                 std::string& why_not);

}  // namespace crest
