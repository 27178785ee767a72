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
#include <memory>
#include <string>
#include <vector>

#include "crest/core/dtype.hpp"
#include "crest/dist/communicator.hpp"
#include "crest/spatial/decomposition.hpp"

namespace crest {

// A layer's halo exchanges, summed over its calls: how long the messages took from posting to
// completion, and how long the layer waited for them. An exchange not overlapped with compute is
// waited for whole, so its time is all exposed.
struct HaloTiming {
  int64_t exchanges = 0;
  double transfer_s = 0, exposed_s = 0;
  // 1 - exposed / transfer, within [0, 1]; 0 before any exchange.
  double hidden_fraction() const;
  void add(double transfer, double exposed);
};

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

  // The same in two halves, so the caller computes while the messages travel; only where rows
  // move along one axis (overlappable(): no stages). start_gather posts the rows the neighbours
  // read and copies this rank's own rows into the window; finish_gather waits and writes the
  // received rows in. start_return posts the window gradient's rows the neighbours own (read from
  // `window_grad` now); finish_return waits and writes the owned gradient as scatter_add does.
  bool overlappable() const { return axes_.size() == 1; }
  // The one moving axis: its tensor dim and plan (overlappable() only).
  int moving_dim() const { return axes_.at(0).dim; }
  int moving_axis() const { return grid_axis_.at(0); }  // its spatial axis (the grid's)
  const AxisPlan& moving_plan() const { return axes_.at(0).plan; }
  // Zeroes the window's rows that the neighbours send (before start_gather, where the caller
  // computes on the window while they travel).
  void zero_received_rows(void* window) const;
  std::unique_ptr<PendingCollective> start_gather(const void* owned, void* window);
  void finish_gather(PendingCollective& pending, void* window);
  std::unique_ptr<PendingCollective> start_return(const void* window_grad);
  void finish_return(PendingCollective& pending, const void* window_grad, void* owned_grad);

  // Where the exchanges' times are added (null: not timed).
  void set_timing(HaloTiming* timing) { timing_ = timing; }

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
  Traffic gather_traffic_of(size_t a) const;
  Traffic return_traffic_of(size_t a) const;
  // add: sum into dst (backward) instead of copying (forward).
  void move_axis(size_t a, const Traffic& t, Stage src, MutableStage dst, bool add);
  // move_axis in its parts: the messages packed and posted, this rank's own rows, and (once the
  // messages are in) the received rows.
  std::unique_ptr<PendingCollective> post_axis(size_t a, const Traffic& t, Stage src);
  void own_rows(size_t a, const Traffic& t, Stage src, MutableStage dst, bool add);
  void received_rows(size_t a, const Traffic& t, MutableStage dst, bool add);
  void wait_timed(PendingCollective& pending);

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
  HaloTiming* timing_ = nullptr;
};

}  // namespace crest
