// Private to the CUDA backend: NCCL as the backend's device collectives
// (crest/core/device_collectives.hpp). libnccl is loaded when a run of several ranks first asks
// for it, not linked: a machine without NCCL runs the backend all the same, and its jobs reduce
// gradients through host copies for MPI.
#pragma once
#include <functional>
#include <memory>

#include "crest/core/device_collectives.hpp"
#include "cuda/context.hpp"

namespace crest::cuda {

// Whether NCCL can be used here: CREST_CUDA_NCCL is not 0, and libnccl.so.2 loads with what
// crest calls (the reason otherwise: dlopen's message, or the variable).
Support nccl_available();

// A communicator of `ranks` ranks on `context`'s device; `share_from_first` carries rank 0's
// unique id to the others (collective, as is this call). Throws crest::Error (runtime) with
// NCCL's message when the initialisation fails.
std::unique_ptr<DeviceCollectives> make_nccl_collectives(
    std::shared_ptr<Context> context, int rank, int ranks,
    const std::function<void(void* data, size_t bytes)>& share_from_first);

}  // namespace crest::cuda
