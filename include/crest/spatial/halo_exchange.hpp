// HaloExchange: builds the input window a rank's part of a windowed layer reads (its own rows plus
// the halo rows its neighbours own) and, backward, returns the window's gradient to the rows'
// owners, who add it into their own.
//
// Tensors are dense row-major arrays (any layout whose spatial axes are dims of their own: plain
// NCDHW, channels-last NDHWC). Axes are exchanged one after another, each message spanning the
// rows already gathered along the earlier axes: that carries the edges and corners a rank needs
// when two or three axes are split, with messages only to the two neighbours along each axis.
// Backward runs the axes in reverse, and each rank adds its own rows first, then the lower
// neighbour's, then the upper's: the sums come out in the same order on every run.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "crest/core/dtype.hpp"
#include "crest/dist/communicator.hpp"
#include "crest/spatial/decomposition.hpp"

namespace crest {

class HaloExchange {
 public:
  // One spatial axis of the group's grid: the tensor dim it is, and this rank's plan along it
  // (an axis of one part has no traffic).
  struct Axis {
    int dim = 0;
    AxisPlan plan;
  };
  // `group`: the spatial group (its ranks numbered as `grid`); `owned_dims`: this rank's tensor
  // with the owned extent on each split dim. `what` names the layer in error messages.
  HaloExchange(Communicator& group, SpatialGrid grid, std::vector<int64_t> owned_dims,
               std::vector<Axis> axes, DType dtype, std::string what);

  const std::vector<int64_t>& owned_dims() const { return stage_dims_.front(); }
  const std::vector<int64_t>& window_dims() const { return stage_dims_.back(); }
  size_t window_bytes() const;
  // Whether any rows move: false where the window is this rank's own block and no neighbour
  // reads any of it (then a split layer runs its kernel on the block itself, with no window).
  bool moves_rows() const { return !axes_.empty(); }
  // The intermediate stages of a gather or scatter_add over two or three axes (0 for one): the
  // caller's transient memory, so a split layer holds nothing between calls.
  size_t stage_bytes() const;
  // What one gather receives from the neighbours, and what it sends them (which a scatter_add
  // receives back as gradients).
  size_t gather_received_bytes() const { return gather_traffic(true); }
  size_t gather_sent_bytes() const { return gather_traffic(false); }

  // owned (owned_dims) -> window (window_dims); `stages`: stage_bytes() bytes (may be null when
  // that is 0).
  void gather(const void* owned, void* window, void* stages);
  // The gradient of the window -> the gradient of the owned rows (overwritten), summing the
  // neighbours' parts in. float32 and float64 only.
  void scatter_add(const void* window_grad, void* owned_grad, void* stages);

 private:
  size_t gather_traffic(bool received) const;
  void gather_axis(size_t a, const void* cur, void* next);
  void scatter_axis(size_t a, const void* cur, void* next);
  // One axis's messages in one direction (global rows; origins: the first row of src and dst).
  struct Traffic {
    IndexRange send_lo, send_hi, recv_lo, recv_hi;
    int64_t src_origin = 0, dst_origin = 0;
    bool backward = false;
  };
  struct Stage {
    const std::vector<int64_t>& dims;
    const void* data;
  };
  struct MutableStage {
    const std::vector<int64_t>& dims;
    void* data;
  };
  // add: sum into dst (backward) instead of copying (forward).
  void move_axis(size_t a, const Traffic& t, Stage src, MutableStage dst, bool add);

  Communicator* group_;
  SpatialGrid grid_;
  int group_rank_ = 0;
  std::vector<Axis> axes_;      // the axes that move rows (split, or cropped by the window)
  std::vector<int> grid_axis_;  // each one's axis in the grid
  DType dtype_;
  std::string what_forward_, what_backward_;  // the exchanges' names in error messages
  // stage_dims_[a]: the tensor once axes [0, a) are gathered; front = owned, back = window.
  std::vector<std::vector<int64_t>> stage_dims_;
  std::vector<size_t> stage_offset_;  // each intermediate stage's place in the caller's memory
  std::vector<std::byte> send_lo_, send_hi_, recv_lo_, recv_hi_;
  std::vector<Communicator::Outgoing> sends_;
  std::vector<Communicator::Incoming> receives_;
};

}  // namespace crest
