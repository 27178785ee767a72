// HaloExchange (halo_exchange.hpp): each axis in turn, forward in order, backward in reverse.
#include "crest/spatial/halo_exchange.hpp"

#include <array>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "crest/core/box_copy.hpp"
#include "crest/core/error.hpp"

namespace crest {
namespace {

// Message tags within the spatial group: forward rows going down/up along axis a, and the
// gradients going back. Distinct per axis and direction, so no two messages in flight between
// two ranks can be confused.
int tag_of(size_t axis, bool backward, bool to_upper) {
  return static_cast<int>(axis) * 4 + (backward ? 2 : 0) + (to_upper ? 1 : 0);
}

// Test hook (docs/testing.md): CREST_TEST_KILL_IN_HALO_EXCHANGE=N@R kills the process of group
// rank R with SIGKILL as it starts its N-th halo message exchange (1-based, forward and backward
// counted alike), after its neighbours have posted theirs: a rank that dies mid-exchange.
void kill_if_asked(int group_rank) {
  static const char* const asked = std::getenv("CREST_TEST_KILL_IN_HALO_EXCHANGE");
  static int exchanges = 0;
  if (!asked) return;
  ++exchanges;
  const std::string v = asked;
  const size_t at = v.find('@');
  if (at == std::string::npos) return;
  if (std::atoi(v.c_str()) == exchanges && std::atoi(v.c_str() + at + 1) == group_rank)
    std::raise(SIGKILL);
}

// `dims` with the rows `rows` (global indices, relative to `origin`) along `dim`: the box's
// start and its extents.
struct Slab {
  std::vector<int64_t> start, count;
};
Slab slab(const std::vector<int64_t>& dims, int dim, IndexRange rows, int64_t origin) {
  Slab s{std::vector<int64_t>(dims.size(), 0), dims};
  s.start[static_cast<size_t>(dim)] = rows.begin - origin;
  s.count[static_cast<size_t>(dim)] = rows.size();
  return s;
}

size_t bytes_of(const std::vector<int64_t>& count, DType dtype) {
  size_t n = dtype_size(dtype);
  for (int64_t c : count) n *= static_cast<size_t>(c);
  return n;
}

}  // namespace

HaloExchange::HaloExchange(Communicator& group, SpatialGrid grid, std::vector<int64_t> owned_dims,
                           std::vector<Axis> axes, DType dtype, std::string what)
    : group_(&group),
      grid_(std::move(grid)),
      group_rank_(group.rank()),
      dtype_(dtype),
      what_forward_(what + ": halo exchange"),
      what_backward_(what + ": halo gradient exchange") {
  CREST_CHECK(axes.size() == grid_.parts.size() && grid_.size() == group.size(),
              "HaloExchange: the grid does not match the group or the axes");
  stage_dims_.push_back(std::move(owned_dims));
  for (size_t g = 0; g < axes.size(); ++g) {
    const Axis& a = axes[g];
    CREST_CHECK(a.plan.owned_in.size() == stage_dims_.back()[static_cast<size_t>(a.dim)],
                "HaloExchange: owned extent differs from the plan");
    // An axis whose window is this rank's own rows, none of which a neighbour reads, moves
    // nothing (an axis of one part, or a 2x2 pooling on even blocks): no stage for it.
    if (a.plan.window == a.plan.owned_in && a.plan.to_lower.empty() && a.plan.to_upper.empty())
      continue;
    axes_.push_back(a);
    grid_axis_.push_back(static_cast<int>(g));
    auto next = stage_dims_.back();
    next[static_cast<size_t>(a.dim)] = a.plan.window.size();
    stage_dims_.push_back(std::move(next));
  }
  size_t at = 0;
  for (size_t a = 1; a + 1 < stage_dims_.size(); ++a) {
    stage_offset_.push_back(at);
    at += (bytes_of(stage_dims_[a], dtype_) + 63) / 64 * 64;
  }
  stage_offset_.push_back(at);  // the end
}

size_t HaloExchange::stage_bytes() const { return stage_offset_.back(); }

size_t HaloExchange::window_bytes() const { return bytes_of(window_dims(), dtype_); }

size_t HaloExchange::gather_traffic(bool received) const {
  size_t n = 0;
  for (size_t a = 0; a < axes_.size(); ++a) {
    const AxisPlan& p = axes_[a].plan;
    // Received rows land in the next stage; sent rows are cut from this one.
    const std::vector<int64_t>& dims = stage_dims_[received ? a + 1 : a];
    for (IndexRange rows :
         received ? std::array{p.from_lower, p.from_upper} : std::array{p.to_lower, p.to_upper})
      n += bytes_of(slab(dims, axes_[a].dim, rows, rows.begin).count, dtype_);
  }
  return n;
}

void HaloExchange::gather(const void* owned, void* window, void* stages) {
  if (axes_.empty()) {
    std::memcpy(window, owned, window_bytes());
    return;
  }
  auto* base = static_cast<std::byte*>(stages);
  const void* cur = owned;
  for (size_t a = 0; a < axes_.size(); ++a) {
    void* next = a + 1 == axes_.size() ? window : base + stage_offset_[a];
    gather_axis(a, cur, next);
    cur = next;
  }
}

void HaloExchange::scatter_add(const void* window_grad, void* owned_grad, void* stages) {
  if (axes_.empty()) {
    std::memcpy(owned_grad, window_grad, window_bytes());
    return;
  }
  auto* base = static_cast<std::byte*>(stages);
  const void* cur = window_grad;
  for (size_t a = axes_.size(); a-- > 0;) {
    void* next = a == 0 ? owned_grad : base + stage_offset_[a - 1];
    scatter_axis(a, cur, next);
    cur = next;
  }
}

// cur: stage a (owned rows along the axis) -> next: stage a + 1 (the window's rows).
void HaloExchange::gather_axis(size_t a, const void* cur, void* next) {
  const AxisPlan& p = axes_[a].plan;
  move_axis(a,
            {.send_lo = p.to_lower,
             .send_hi = p.to_upper,
             .recv_lo = p.from_lower,
             .recv_hi = p.from_upper,
             .src_origin = p.owned_in.begin,
             .dst_origin = p.window.begin,
             .backward = false},
            {stage_dims_[a], cur}, {stage_dims_[a + 1], next}, false);
}

// cur: the gradient at stage a + 1 (window rows) -> next: stage a (owned rows), overwritten.
// The window's rows a neighbour owns go back to it; the rows this rank sent it come back summed.
void HaloExchange::scatter_axis(size_t a, const void* cur, void* next) {
  const AxisPlan& p = axes_[a].plan;
  std::memset(next, 0, bytes_of(stage_dims_[a], dtype_));
  move_axis(a,
            {.send_lo = p.from_lower,
             .send_hi = p.from_upper,
             .recv_lo = p.to_lower,
             .recv_hi = p.to_upper,
             .src_origin = p.window.begin,
             .dst_origin = p.owned_in.begin,
             .backward = true},
            {stage_dims_[a + 1], cur}, {stage_dims_[a], next}, true);
}

// Packs the rows sent to each neighbour, swaps them, then writes this rank's own rows and the
// received ones into dst (copied forward, added backward: own, lower, upper, in that order).
void HaloExchange::move_axis(size_t a, const Traffic& t, Stage src, MutableStage dst, bool add) {
  const BoxOp op = add ? BoxOp::add : BoxOp::copy;
  const int dim = axes_[a].dim;
  const int axis = grid_axis_[a];
  auto zeros = [](const std::vector<int64_t>& c) { return std::vector<int64_t>(c.size(), 0); };
  auto pack = [&](IndexRange rows, std::vector<std::byte>& buf) {
    const Slab s = slab(src.dims, dim, rows, t.src_origin);
    buf.resize(bytes_of(s.count, dtype_));
    box_transfer(src.data, BoxAt{src.dims, s.start}, buf.data(), BoxAt{s.count, zeros(s.count)},
                 s.count, dtype_, BoxOp::copy);
  };
  // Members, cleared: a step allocates nothing once every axis has run.
  std::vector<Communicator::Outgoing>& sends = sends_;
  std::vector<Communicator::Incoming>& receives = receives_;
  sends.clear();
  receives.clear();
  auto send = [&](IndexRange rows, std::vector<std::byte>& buf, int step) {
    pack(rows, buf);
    sends.push_back({grid_.neighbour(group_rank_, axis, step), tag_of(a, t.backward, step > 0),
                     buf.data(), buf.size()});
  };
  auto expect = [&](IndexRange rows, std::vector<std::byte>& buf, int step) {
    buf.resize(bytes_of(slab(dst.dims, dim, rows, t.dst_origin).count, dtype_));
    // The neighbour below sent its rows up, the one above sent them down.
    receives.push_back({grid_.neighbour(group_rank_, axis, step), tag_of(a, t.backward, step < 0),
                        buf.data(), buf.size()});
  };
  if (!t.send_lo.empty()) send(t.send_lo, send_lo_, -1);
  if (!t.send_hi.empty()) send(t.send_hi, send_hi_, +1);
  if (!t.recv_lo.empty()) expect(t.recv_lo, recv_lo_, -1);
  if (!t.recv_hi.empty()) expect(t.recv_hi, recv_hi_, +1);
  kill_if_asked(group_rank_);
  group_->exchange(sends, receives, t.backward ? what_backward_ : what_forward_);

  const AxisPlan& p = axes_[a].plan;
  const IndexRange mine = intersect(p.owned_in, p.window);
  const Slab own_from = slab(src.dims, dim, mine, t.src_origin);
  const Slab own_to = slab(dst.dims, dim, mine, t.dst_origin);
  box_transfer(src.data, BoxAt{src.dims, own_from.start}, dst.data, BoxAt{dst.dims, own_to.start},
               own_from.count, dtype_, op);
  auto unpack = [&](IndexRange rows, const std::vector<std::byte>& buf) {
    const Slab s = slab(dst.dims, dim, rows, t.dst_origin);
    box_transfer(buf.data(), BoxAt{s.count, zeros(s.count)}, dst.data, BoxAt{dst.dims, s.start},
                 s.count, dtype_, op);
  };
  if (!t.recv_lo.empty()) unpack(t.recv_lo, recv_lo_);
  if (!t.recv_hi.empty()) unpack(t.recv_hi, recv_hi_);
}

}  // namespace crest
