// HaloExchange: builds the input window a rank's part of a windowed layer reads (its own rows plus
// the halo rows its neighbours own) and, backward, returns the window's gradient to the rows'
// owners, who add it into their own.
//
// Tensors are dense row-major arrays (any layout whose spatial axes are dims of their own: plain
// NCDHW, channels-last NDHWC). Every neighbour whose rows the window reads gets one message of
// its own, all posted at once: the two along each split axis, and where two or three axes are
// split the edge and corner neighbours too (up to 26), each message the box of rows the
// receiver's window reads. No message waits for another, so a caller computes while all of them
// travel (halo_overlap.hpp). Backward each rank adds its own rows first, then what each neighbour
// returns in a fixed order: the sums come out in the same order on every run.
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
  // Exchanges of different `channel`s (0-3) may be in flight at once between the same ranks:
  // their messages have tags of their own.
  HaloExchange(Communicator& group, SpatialGrid grid, std::vector<int64_t> owned_dims,
               std::vector<Axis> axes, DType dtype, const std::string& what, int channel = 0);

  const std::vector<int64_t>& owned_dims() const { return owned_dims_; }
  const std::vector<int64_t>& window_dims() const { return window_dims_; }
  size_t window_bytes() const;
  // Whether any rows move: false where the window is this rank's own block and no neighbour
  // reads any of it (then a split layer runs its kernel on the block itself, with no window).
  bool moves_rows() const { return !axes_.empty(); }
  // What one gather receives from the neighbours, and what it sends them (which a scatter_add
  // receives back as gradients).
  size_t gather_received_bytes() const { return gather_traffic(true); }
  size_t gather_sent_bytes() const { return gather_traffic(false); }

  // owned (owned_dims) -> window (window_dims).
  void gather(const void* owned, void* window);
  // The gradient of the window -> the gradient of the owned rows (overwritten), summing the
  // neighbours' parts in. float32 and float64 only.
  void scatter_add(const void* window_grad, void* owned_grad);

  // The same in two halves, so the caller computes while the messages travel. start_gather
  // posts the rows the neighbours read and copies this rank's own rows into the window;
  // finish_gather waits and writes the received rows in. start_return posts the window
  // gradient's rows the neighbours own (read from `window_grad` now); finish_return waits and
  // writes the owned gradient as scatter_add does.
  std::unique_ptr<PendingCollective> start_gather(const void* owned, void* window);
  void finish_gather(PendingCollective& pending, void* window);
  std::unique_ptr<PendingCollective> start_return(const void* window_grad);
  void finish_return(PendingCollective& pending, const void* window_grad, void* owned_grad);
  // Zeroes the window's rows that the neighbours send (before start_gather, where the caller
  // computes on the window while they travel).
  void zero_received_rows(void* window) const;

  // The axes whose rows move (split, or cropped by the window) and each one's axis in the grid.
  const std::vector<Axis>& moving_axes() const { return axes_; }
  const std::vector<int>& moving_grid_axes() const { return grid_axis_; }

  // Where the exchanges' times are added (null: not timed).
  void set_timing(HaloTiming* timing) { timing_ = timing; }

 private:
  // One neighbour's messages: the box of this rank's owned rows it reads (sent forward, summed in
  // backward) and the box of the window it owns (received forward, returned backward); a box
  // with an empty extent moves nothing. `code` numbers its offset in the grid, (o + 1) * 3^a
  // summed over the moving axes a, so a message's tag says which neighbour sent it.
  struct Box {
    std::vector<int64_t> start, count;
    bool empty() const;
  };
  struct Neighbour {
    int peer = 0, code = 0;
    Box owned, window;
    std::vector<std::byte> out, in;  // message buffers, kept from step to step
  };
  void plan_neighbours();
  size_t gather_traffic(bool received) const;
  // Packs and posts every message of one direction: forward the owned boxes out and the window
  // boxes in, backward the reverse.
  std::unique_ptr<PendingCollective> post(const void* src, bool backward);
  // This rank's own rows in the owned array or in the window.
  Box own_box(bool in_window) const;
  void wait_timed(PendingCollective& pending);

  Communicator* group_;
  SpatialGrid grid_;
  int group_rank_ = 0;
  std::vector<Axis> axes_;      // the axes that move rows (split, or cropped by the window)
  std::vector<int> grid_axis_;  // each one's axis in the grid
  DType dtype_;
  int channel_ = 0;
  std::string what_forward_, what_backward_;  // the exchanges' names in error messages
  std::vector<int64_t> owned_dims_, window_dims_;
  std::vector<Neighbour> neighbours_;
  Box own_in_owned_, own_in_window_;  // own_box, planned once
  std::vector<Communicator::Outgoing> sends_;
  std::vector<Communicator::Incoming> receives_;
  HaloTiming* timing_ = nullptr;
};

}  // namespace crest
