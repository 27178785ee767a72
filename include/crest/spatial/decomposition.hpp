// Spatial decomposition (docs/distributed.md, "Spatial split"): one sample's spatial axes divided
// among the ranks of a spatial group, and what each rank of a sliding-window layer (convolution,
// pooling) needs from its neighbours along one axis.
//
// Every activation is block-split by its own extent, as numpy.array_split does (the first
// `extent % parts` parts get one row more), so a layer's output split is the next layer's input
// split and uneven extents (33 rows over 2 ranks) need nothing special. A rank computes the
// output rows it owns; the input rows those read and that a neighbour owns are its halo. Only the
// two neighbours along an axis may hold them: a decomposition whose halo would reach further is
// refused before any work (plan_axis).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "crest/core/shape.hpp"
#include "crest/graph/window_axis.hpp"

namespace crest {

// Rows [begin, end) of one axis.
struct IndexRange {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end > begin ? end - begin : 0; }
  bool empty() const { return end <= begin; }
  bool operator==(const IndexRange& o) const { return begin == o.begin && end == o.end; }
};
IndexRange intersect(IndexRange a, IndexRange b);
std::string str(IndexRange r);  // "[3, 9)"

// Part `index` of `extent` rows split into `parts` blocks (numpy.array_split's rule).
IndexRange block_range(int64_t extent, int parts, int index);

// The ranks of one spatial group as a grid: `parts[a]` ranks along spatial axis a (depth, height,
// width for 3-D data), numbered row-major (the last axis fastest), as MPI_Cart_create numbers a
// Cartesian communicator.
struct SpatialGrid {
  std::vector<int> parts;
  int size() const;
  std::vector<int> coords(int group_rank) const;
  int rank_of(const std::vector<int>& coords) const;
  // The group rank `step` (-1 or +1) away along `axis`.
  int neighbour(int group_rank, int axis, int step) const;
};

// Every group rank's block of a tensor [n, c, spatial...] of shape `global`: per rank, the rows
// it holds along each spatial axis (block_range over the grid).
std::vector<std::vector<IndexRange>> blocks_of(const SpatialGrid& grid, const Shape& global);

// The input rows output rows `out` read, padding included (may start below 0 or end past
// in_extent).
IndexRange rows_read(const WindowAxis& w, IndexRange out);

// The padding a kernel on input rows `window` needs to compute exactly output rows `out`: for a
// window, the rows read beyond the input's edges; for a transposed window, how many of the
// rows its first and last input rows write fall before and after `out` (cropped).
struct LocalPadding {
  int64_t lo = 0, hi = 0;
};
LocalPadding local_padding(const WindowAxis& w, IndexRange window, IndexRange out);

// One rank's part of a windowed layer along one axis, and its halo traffic (global row indices).
struct AxisPlan {
  int parts = 1, index = 0;
  IndexRange owned_in, owned_out;
  IndexRange window;               // input rows the local kernel reads, within [0, in_extent)
  int64_t pad_lo = 0, pad_hi = 0;  // the local kernel's padding (local_padding)
  // Rows received from the lower (index - 1) and upper (index + 1) neighbour, and rows of
  // owned_in sent to them; empty where there is no traffic.
  IndexRange from_lower, from_upper, to_lower, to_upper;
};

// "" where every one of `parts` parts of the axis owns input and output rows and reads only its
// own and its neighbours' rows (and, transposed, needs no negative padding); else what is wrong.
std::string split_problem(const WindowAxis& w, int parts);

// Plans part `index` of `parts` along an axis. Refuses (crest::Error, usage: exit 2) a split that
// leaves some part without output or input rows, or whose halo needs rows beyond a neighbour's
// part (split_problem); the message names `layer`, `axis` and the extents (`key` is the
// configuration key of the decomposition, "dist.spatial").
AxisPlan plan_axis(const WindowAxis& w, int parts, int index, const std::string& layer,
                   const std::string& axis, const std::string& key = "dist.spatial");

}  // namespace crest
