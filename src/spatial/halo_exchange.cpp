// HaloExchange (halo_exchange.hpp): each axis in turn, forward in order, backward in reverse.
#include "crest/spatial/halo_exchange.hpp"

#include <algorithm>
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

std::vector<int64_t> zeros_like(const std::vector<int64_t>& count) {
  return std::vector<int64_t>(count.size(), 0);
}

size_t bytes_of(const std::vector<int64_t>& count, DType dtype) {
  size_t n = dtype_size(dtype);
  for (int64_t c : count) n *= static_cast<size_t>(c);
  return n;
}

}  // namespace

double HaloTiming::hidden_fraction() const {
  if (transfer_s <= 0) return 0;
  return std::clamp(1 - exposed_s / transfer_s, 0.0, 1.0);
}

void HaloTiming::add(double transfer, double exposed) {
  ++exchanges;
  transfer_s += transfer;
  exposed_s += exposed;
}

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

HaloExchange::Traffic HaloExchange::gather_traffic_of(size_t a) const {
  const AxisPlan& p = axes_[a].plan;
  return {.send_lo = p.to_lower,
          .send_hi = p.to_upper,
          .recv_lo = p.from_lower,
          .recv_hi = p.from_upper,
          .src_origin = p.owned_in.begin,
          .dst_origin = p.window.begin,
          .backward = false};
}

// The window's rows a neighbour owns go back to it; the rows this rank sent it come back summed.
HaloExchange::Traffic HaloExchange::return_traffic_of(size_t a) const {
  const AxisPlan& p = axes_[a].plan;
  return {.send_lo = p.from_lower,
          .send_hi = p.from_upper,
          .recv_lo = p.to_lower,
          .recv_hi = p.to_upper,
          .src_origin = p.window.begin,
          .dst_origin = p.owned_in.begin,
          .backward = true};
}

// cur: stage a (owned rows along the axis) -> next: stage a + 1 (the window's rows).
void HaloExchange::gather_axis(size_t a, const void* cur, void* next) {
  move_axis(a, gather_traffic_of(a), {stage_dims_[a], cur}, {stage_dims_[a + 1], next}, false);
}

// cur: the gradient at stage a + 1 (window rows) -> next: stage a (owned rows), overwritten.
void HaloExchange::scatter_axis(size_t a, const void* cur, void* next) {
  move_axis(a, return_traffic_of(a), {stage_dims_[a + 1], cur}, {stage_dims_[a], next}, true);
}

void HaloExchange::zero_received_rows(void* window) const {
  CREST_CHECK(overlappable(), "HaloExchange: zero_received_rows moves rows along one axis");
  const AxisPlan& p = axes_[0].plan;
  const std::vector<int64_t>& dims = stage_dims_[1];
  const auto dim = static_cast<size_t>(axes_[0].dim);
  // Rows along `dim` are contiguous runs of `inner` elements, repeated `outer` times.
  size_t outer = 1, inner = dtype_size(dtype_);
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i < dim) outer *= static_cast<size_t>(dims[i]);
    if (i > dim) inner *= static_cast<size_t>(dims[i]);
  }
  auto* base = static_cast<std::byte*>(window);
  for (IndexRange rows : {p.from_lower, p.from_upper}) {
    if (rows.empty()) continue;
    const auto first = static_cast<size_t>(rows.begin - p.window.begin);
    for (size_t o = 0; o < outer; ++o)
      std::memset(base + (o * static_cast<size_t>(dims[dim]) + first) * inner, 0,
                  static_cast<size_t>(rows.size()) * inner);
  }
}

std::unique_ptr<PendingCollective> HaloExchange::start_gather(const void* owned, void* window) {
  CREST_CHECK(overlappable(), "HaloExchange: an overlapped gather moves rows along one axis");
  const Traffic t = gather_traffic_of(0);
  auto pending = post_axis(0, t, {stage_dims_[0], owned});
  own_rows(0, t, {stage_dims_[0], owned}, {stage_dims_[1], window}, false);
  return pending;
}

void HaloExchange::finish_gather(PendingCollective& pending, void* window) {
  wait_timed(pending);
  received_rows(0, gather_traffic_of(0), {stage_dims_[1], window}, false);
}

std::unique_ptr<PendingCollective> HaloExchange::start_return(const void* window_grad) {
  CREST_CHECK(overlappable(), "HaloExchange: an overlapped return moves rows along one axis");
  return post_axis(0, return_traffic_of(0), {stage_dims_[1], window_grad});
}

void HaloExchange::finish_return(PendingCollective& pending, const void* window_grad,
                                 void* owned_grad) {
  wait_timed(pending);
  const Traffic t = return_traffic_of(0);
  std::memset(owned_grad, 0, bytes_of(stage_dims_[0], dtype_));
  own_rows(0, t, {stage_dims_[1], window_grad}, {stage_dims_[0], owned_grad}, true);
  received_rows(0, t, {stage_dims_[0], owned_grad}, true);
}

void HaloExchange::wait_timed(PendingCollective& pending) {
  const double begin = steady_seconds();
  pending.wait();
  const double exposed = steady_seconds() - begin;
  if (!timing_) return;
  const PendingCollective::Timing t = pending.timing();
  timing_->add(std::max(t.done - t.queued, exposed), exposed);
}

// The exchange of one axis, waited for whole; backward (add) the owned gradient is overwritten
// and summed own rows first, then the lower neighbour's, then the upper's.
void HaloExchange::move_axis(size_t a, const Traffic& t, Stage src, MutableStage dst, bool add) {
  auto pending = post_axis(a, t, src);
  wait_timed(*pending);
  if (add) std::memset(dst.data, 0, bytes_of(dst.dims, dtype_));
  own_rows(a, t, src, dst, add);
  received_rows(a, t, dst, add);
}

// Packs the rows sent to each neighbour and posts every message of the axis (started, not
// waited for: the communicator drives them while the caller computes).
std::unique_ptr<PendingCollective> HaloExchange::post_axis(size_t a, const Traffic& t, Stage src) {
  const int dim = axes_[a].dim;
  const int axis = grid_axis_[a];
  auto pack = [&](IndexRange rows, std::vector<std::byte>& buf) {
    const Slab s = slab(src.dims, dim, rows, t.src_origin);
    buf.resize(bytes_of(s.count, dtype_));
    box_transfer(src.data, BoxAt{src.dims, s.start}, buf.data(),
                 BoxAt{s.count, zeros_like(s.count)}, s.count, dtype_, BoxOp::copy);
  };
  // Members, cleared: a step allocates nothing once every axis has run.
  sends_.clear();
  receives_.clear();
  auto send = [&](IndexRange rows, std::vector<std::byte>& buf, int step) {
    pack(rows, buf);
    sends_.push_back({grid_.neighbour(group_rank_, axis, step), tag_of(a, t.backward, step > 0),
                      buf.data(), buf.size()});
  };
  auto expect = [&](IndexRange rows, std::vector<std::byte>& buf, int step) {
    const std::vector<int64_t>& dims = stage_dims_[t.backward ? a : a + 1];
    buf.resize(bytes_of(slab(dims, dim, rows, t.dst_origin).count, dtype_));
    // The neighbour below sent its rows up, the one above sent them down.
    receives_.push_back({grid_.neighbour(group_rank_, axis, step), tag_of(a, t.backward, step < 0),
                         buf.data(), buf.size()});
  };
  if (!t.send_lo.empty()) send(t.send_lo, send_lo_, -1);
  if (!t.send_hi.empty()) send(t.send_hi, send_hi_, +1);
  if (!t.recv_lo.empty()) expect(t.recv_lo, recv_lo_, -1);
  if (!t.recv_hi.empty()) expect(t.recv_hi, recv_hi_, +1);
  kill_if_asked(group_rank_);
  return group_->start_exchange(sends_, receives_, t.backward ? what_backward_ : what_forward_);
}

void HaloExchange::own_rows(size_t a, const Traffic& t, Stage src, MutableStage dst, bool add) {
  const int dim = axes_[a].dim;
  const AxisPlan& p = axes_[a].plan;
  const IndexRange mine = intersect(p.owned_in, p.window);
  const Slab from = slab(src.dims, dim, mine, t.src_origin);
  const Slab to = slab(dst.dims, dim, mine, t.dst_origin);
  box_transfer(src.data, BoxAt{src.dims, from.start}, dst.data, BoxAt{dst.dims, to.start},
               from.count, dtype_, add ? BoxOp::add : BoxOp::copy);
}

void HaloExchange::received_rows(size_t a, const Traffic& t, MutableStage dst, bool add) {
  const int dim = axes_[a].dim;
  auto unpack = [&](IndexRange rows, const std::vector<std::byte>& buf) {
    const Slab s = slab(dst.dims, dim, rows, t.dst_origin);
    box_transfer(buf.data(), BoxAt{s.count, zeros_like(s.count)}, dst.data,
                 BoxAt{dst.dims, s.start}, s.count, dtype_, add ? BoxOp::add : BoxOp::copy);
  };
  if (!t.recv_lo.empty()) unpack(t.recv_lo, recv_lo_);
  if (!t.recv_hi.empty()) unpack(t.recv_hi, recv_hi_);
}

}  // namespace crest
