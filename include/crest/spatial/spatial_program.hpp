// The spatial group as the compiler sees it (crest/graph/spatial_split.hpp): a SpatialSplit over
// a group communicator whose ranks form `grid`. Put into CompileOptions::spatial, it makes the
// executor hold blocks of the split activations, run convolutions and pooling with halo
// exchanges (SpatialConv, SpatialPool) and gather blocks where a layer needs a whole tensor.
#pragma once
#include <memory>

#include "crest/dist/communicator.hpp"
#include "crest/graph/spatial_split.hpp"
#include "crest/spatial/decomposition.hpp"
#include "crest/spatial/halo_overlap.hpp"

namespace crest {

// `group` must outlive every executor compiled with the result. Refuses (exit 2, naming
// dist.spatial) a grid whose size is not the group's. `overlap`: whether split convolutions
// overlap their halo exchange with compute (dist.halo_overlap). `replicas`: the ranks at this
// rank's place in every group (data parallelism; null: none), over which the dense head's weight
// parts are averaged.
std::shared_ptr<SpatialSplit> make_spatial_split(
    Communicator& group, SpatialGrid grid, HaloOverlapMode overlap = HaloOverlapMode::automatic,
    Communicator* replicas = nullptr);

}  // namespace crest
