#include "gradient_sync_setup.hpp"

#include <string>
#include <utility>

#include "crest/engine/device_collectives_everywhere.hpp"

namespace crest {

std::unique_ptr<GradientSync> make_gradient_sync(Communicator& comm, Executor& ex,
                                                 const GradientSyncOptions& o) {
  auto sync = std::make_unique<GradientSync>(comm, ex.params(), ex.gradient_ready_order(),
                                             o.first_bucket_mb, o.bucket_mb, o.compression);
  sync->verify_same_layout_everywhere();
  sync->broadcast_parameters(ex.params());
  if (comm.size() > 1 && !ex.params().memory().is_host()) {
    std::string why_not;
    if (auto device = device_collectives_everywhere(comm, ex.backend(), why_not))
      sync->reduce_on_device(std::move(device), o.timeout_s);
    else
      sync->note_host_copies(why_not);
  }
  return sync;
}

}  // namespace crest
