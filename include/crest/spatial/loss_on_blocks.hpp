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

// That block's shape, and a copy of it out of the whole target (`layout`: the whole's and the
// block's, plain or channels-last; class labels have no channel axis and are plain).
Shape target_block_shape(const SpatialSplit& split, const Shape& global);
void copy_target_block(const SpatialSplit& split, const void* whole, const Shape& global,
                       Layout layout, DType dtype, void* block);

}  // namespace crest
