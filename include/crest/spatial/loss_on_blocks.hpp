// A loss computed on the blocks of a split prediction (SpatialSplit::loss_over_blocks and
// take_block; docs/distributed.md, "The loss on blocks"): each rank evaluates the loss on its
// block, and the group's sum of the blocks' shares is the sample's loss.
#pragma once
#include <memory>

#include "crest/dist/communicator.hpp"
#include "crest/graph/layer.hpp"
#include "crest/graph/spatial_split.hpp"

namespace crest {

// `loss` (SpatialRole::position_mean, compiled for the blocks) on this rank's blocks of a
// prediction whose whole shape is `global`, its value summed over `group`.
std::unique_ptr<Layer> make_loss_on_blocks(std::unique_ptr<Layer> loss, Communicator& group,
                                           const Shape& global);

// This rank's block of a whole target of shape `global` ([n, c, spatial...], or class labels
// [n, spatial...]) under `split`.
std::unique_ptr<Layer> make_take_block(const SpatialSplit& split, const Shape& global);

}  // namespace crest
