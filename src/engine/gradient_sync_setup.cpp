#include "gradient_sync_setup.hpp"

#include <cstdint>
#include <string>

namespace crest {
namespace {

// Every rank asks its backend first, and the collectives are made only if all can: making them
// is collective (NCCL's initialisation waits for every rank), so one rank without the library
// must not leave the others waiting.
void reduce_on_device_where_every_rank_can(Communicator& comm, Backend& backend, GradientSync& sync,
                                           double timeout_s) {
  const Support here = backend.supports_device_collectives();
  int64_t missing = here ? 0 : 1;
  comm.allreduce_sum(&missing, 1);
  if (missing > 0) {
    sync.note_host_copies(here ? std::to_string(missing) + " of " + std::to_string(comm.size()) +
                                     " ranks cannot make " + backend.name() + "'s collectives"
                               : here.reason);
    return;
  }
  auto share = [&comm](void* data, size_t bytes) { comm.broadcast(data, bytes, 0); };
  sync.reduce_on_device(backend.device_collectives(comm.rank(), comm.size(), share), timeout_s);
}

}  // namespace

std::unique_ptr<GradientSync> make_gradient_sync(Communicator& comm, Executor& ex,
                                                 const GradientSyncOptions& o) {
  auto sync = std::make_unique<GradientSync>(comm, ex.params(), ex.gradient_ready_order(),
                                             o.first_bucket_mb, o.bucket_mb, o.compression);
  sync->verify_same_layout_everywhere();
  sync->broadcast_parameters(ex.params());
  if (comm.size() > 1 && !ex.params().memory().is_host())
    reduce_on_device_where_every_rank_can(comm, ex.backend(), *sync, o.timeout_s);
  return sync;
}

}  // namespace crest
