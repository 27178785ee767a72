// The columns of a dense layer's weight that multiply one rank's block of a flattened split
// value (SpatialSplit::feature_columns; docs/distributed.md, "The dense head").
#pragma once
#include <memory>
#include <vector>

#include "crest/dist/communicator.hpp"
#include "crest/graph/param_shard.hpp"
#include "crest/spatial/decomposition.hpp"

namespace crest {

// A run of consecutive whole columns.
struct ColumnRun {
  int64_t begin = 0, count = 0;
};

// The whole features (channels-last flattening of `global` [n, c, spatial...]) of each group
// rank's block, as runs in the block's own flattening order; adjacent runs are merged.
std::vector<std::vector<ColumnRun>> block_feature_runs(const SpatialGrid& grid,
                                                       const Shape& global);

// The part of a [rows, features] weight this rank of `group` holds. `replicas`: the ranks
// holding the same part (null: none).
std::shared_ptr<const ParamShard> make_feature_columns(Communicator& group, Communicator* replicas,
                                                       const SpatialGrid& grid, const Shape& global,
                                                       int64_t rows);

}  // namespace crest
