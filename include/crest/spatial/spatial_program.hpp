// The spatial group as the compiler sees it (crest/graph/spatial_split.hpp): a SpatialSplit over
// a group communicator whose ranks form `grid`. Put into CompileOptions::spatial, it makes the
// executor hold blocks of the split activations, run convolutions and pooling with halo
// exchanges (SpatialConv, SpatialPool) and gather blocks where a layer needs a whole tensor.
#pragma once
#include <memory>

#include "crest/dist/communicator.hpp"
#include "crest/graph/spatial_split.hpp"
#include "crest/spatial/decomposition.hpp"

namespace crest {

// `group` must outlive every executor compiled with the result. Refuses (exit 2, naming
// dist.spatial) a grid whose size is not the group's.
std::shared_ptr<SpatialSplit> make_spatial_split(Communicator& group, SpatialGrid grid);

}  // namespace crest
