// Private to the engine: a replica group's gradient synchronisation as the training steps set it
// up (TrainingSession, a pipeline stage's replicas).
#pragma once
#include <memory>

#include "crest/dist/gradient_sync.hpp"
#include "crest/engine/training_session.hpp"
#include "crest/graph/executor.hpp"

namespace crest {

// GradientSync over `comm` for `ex`'s parameters: every rank's layout checked against rank 0's
// and rank 0's parameters broadcast. Where they live on a device, the buckets are reduced by the
// backend's own collectives (NCCL) when every rank of `comm` can make them, else through host
// copies for MPI, the reason noted (GradientSync::reduction). Collective.
std::unique_ptr<GradientSync> make_gradient_sync(Communicator& comm, Executor& ex,
                                                 const GradientSyncOptions& o);

}  // namespace crest
