// HaloExchange (halo_exchange.hpp): one message per neighbour and direction, all posted at once.
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

// Message tags within the spatial group: the exchange's channel, the direction and the sender's
// offset code (halo_exchange.hpp, Neighbour::code, below 27). Distinct per channel, neighbour and
// direction, so no two messages in flight between two ranks can be confused.
int tag_of(int channel, bool backward, int code) {
  return 64 + channel * 64 + (backward ? 32 : 0) + code;
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

std::vector<int64_t> zeros_like(const std::vector<int64_t>& count) {
  return std::vector<int64_t>(count.size(), 0);
}

// How many neighbour offsets k moving axes give, this rank's own included: 3^k.
int offset_count(size_t axes) {
  int n = 1;
  for (size_t a = 0; a < axes; ++a) n *= 3;
  return n;
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
                           std::vector<Axis> axes, DType dtype, const std::string& what,
                           int channel)
    : group_(&group),
      grid_(std::move(grid)),
      group_rank_(group.rank()),
      dtype_(dtype),
      channel_(channel),
      what_forward_(what + ": halo exchange"),
      what_backward_(what + ": halo gradient exchange"),
      owned_dims_(std::move(owned_dims)) {
  CREST_CHECK(axes.size() == grid_.parts.size() && grid_.size() == group.size(),
              "HaloExchange: the grid does not match the group or the axes");
  CREST_CHECK(channel >= 0 && channel < 4, "HaloExchange: channel out of range");
  window_dims_ = owned_dims_;
  for (size_t g = 0; g < axes.size(); ++g) {
    const Axis& a = axes[g];
    const auto dim = static_cast<size_t>(a.dim);
    CREST_CHECK(a.plan.owned_in.size() == owned_dims_[dim],
                "HaloExchange: owned extent differs from the plan");
    // An axis whose window is this rank's own rows, none of which a neighbour reads, moves
    // nothing (an axis of one part, or a 2x2 pooling on even blocks).
    if (a.plan.window == a.plan.owned_in && a.plan.to_lower.empty() && a.plan.to_upper.empty())
      continue;
    axes_.push_back(a);
    grid_axis_.push_back(static_cast<int>(g));
    window_dims_[dim] = a.plan.window.size();
  }
  plan_neighbours();
  own_in_owned_ = own_box(false);
  own_in_window_ = own_box(true);
}

bool HaloExchange::Box::empty() const {
  return std::any_of(count.begin(), count.end(), [](int64_t c) { return c <= 0; });
}

namespace {

// The rows of this rank's block that a neighbour at offset `o` (-1, 0, +1) along an axis reads
// (`sent`), or that this rank reads of that neighbour's (received): a neighbour level with this
// rank along the axis has the same plan there, so it reads the same own rows this rank does.
IndexRange rows_between(const AxisPlan& p, int o, bool sent) {
  if (o < 0) return sent ? p.to_lower : p.from_lower;
  if (o > 0) return sent ? p.to_upper : p.from_upper;
  return intersect(p.owned_in, p.window);
}

}  // namespace

// Every neighbour offset in {-1, 0, 1}^k over the k moving axes, but this rank's own: a corner
// neighbour's box is the product of the rows each axis's plan moves towards it.
void HaloExchange::plan_neighbours() {
  const std::vector<int> me = grid_.coords(group_rank_);
  const int offsets = offset_count(axes_.size());
  for (int code = 0; code < offsets; ++code) {
    if (code == (offsets - 1) / 2) continue;  // offset 0 along every axis: this rank
    Neighbour n;
    n.code = code;
    n.owned = {zeros_like(owned_dims_), owned_dims_};
    n.window = {zeros_like(window_dims_), window_dims_};
    std::vector<int> at = me;
    bool exists = true;
    for (size_t a = 0, rest = static_cast<size_t>(code); a < axes_.size(); ++a, rest /= 3) {
      const int o = static_cast<int>(rest % 3) - 1;
      const auto g = static_cast<size_t>(grid_axis_[a]);
      at[g] += o;
      exists = exists && at[g] >= 0 && at[g] < grid_.parts[g];
      const AxisPlan& p = axes_[a].plan;
      const auto dim = static_cast<size_t>(axes_[a].dim);
      const IndexRange sent = rows_between(p, o, true), received = rows_between(p, o, false);
      n.owned.start[dim] = sent.begin - p.owned_in.begin;
      n.owned.count[dim] = sent.size();
      n.window.start[dim] = received.begin - p.window.begin;
      n.window.count[dim] = received.size();
    }
    if (!exists || (n.owned.empty() && n.window.empty())) continue;
    n.peer = grid_.rank_of(at);
    neighbours_.push_back(std::move(n));
  }
}

size_t HaloExchange::window_bytes() const { return bytes_of(window_dims_, dtype_); }

size_t HaloExchange::gather_traffic(bool received) const {
  size_t n = 0;
  for (const Neighbour& b : neighbours_) {
    const Box& box = received ? b.window : b.owned;
    if (!box.empty()) n += bytes_of(box.count, dtype_);
  }
  return n;
}

HaloExchange::Box HaloExchange::own_box(bool in_window) const {
  Box b{zeros_like(owned_dims_), owned_dims_};
  for (const Axis& a : axes_) {
    const IndexRange mine = intersect(a.plan.owned_in, a.plan.window);
    const auto dim = static_cast<size_t>(a.dim);
    b.start[dim] = mine.begin - (in_window ? a.plan.window.begin : a.plan.owned_in.begin);
    b.count[dim] = mine.size();
  }
  return b;
}

void HaloExchange::gather(const void* owned, void* window) {
  if (axes_.empty()) {
    std::memcpy(window, owned, window_bytes());
    return;
  }
  auto pending = start_gather(owned, window);
  finish_gather(*pending, window);
}

void HaloExchange::scatter_add(const void* window_grad, void* owned_grad) {
  if (axes_.empty()) {
    std::memcpy(owned_grad, window_grad, window_bytes());
    return;
  }
  auto pending = start_return(window_grad);
  finish_return(*pending, window_grad, owned_grad);
}

void HaloExchange::zero_received_rows(void* window) const {
  for (const Neighbour& n : neighbours_)
    box_transfer(nullptr, BoxAt{n.window.count, zeros_like(n.window.count)}, window,
                 BoxAt{window_dims_, n.window.start}, n.window.count, dtype_, BoxOp::zero);
}

std::unique_ptr<PendingCollective> HaloExchange::start_gather(const void* owned, void* window) {
  auto pending = post(owned, false);
  const Box& in_owned = own_in_owned_;
  const Box& in_window = own_in_window_;
  box_transfer(owned, BoxAt{owned_dims_, in_owned.start}, window,
               BoxAt{window_dims_, in_window.start}, in_owned.count, dtype_, BoxOp::copy);
  return pending;
}

void HaloExchange::finish_gather(PendingCollective& pending, void* window) {
  wait_timed(pending);
  for (const Neighbour& n : neighbours_)
    if (!n.window.empty())
      box_transfer(n.in.data(), BoxAt{n.window.count, zeros_like(n.window.count)}, window,
                   BoxAt{window_dims_, n.window.start}, n.window.count, dtype_, BoxOp::copy);
}

std::unique_ptr<PendingCollective> HaloExchange::start_return(const void* window_grad) {
  return post(window_grad, true);
}

// The owned gradient is overwritten: this rank's own rows first, then each neighbour's return
// in the order of their offsets.
void HaloExchange::finish_return(PendingCollective& pending, const void* window_grad,
                                 void* owned_grad) {
  wait_timed(pending);
  std::memset(owned_grad, 0, bytes_of(owned_dims_, dtype_));
  const Box& in_owned = own_in_owned_;
  const Box& in_window = own_in_window_;
  box_transfer(window_grad, BoxAt{window_dims_, in_window.start}, owned_grad,
               BoxAt{owned_dims_, in_owned.start}, in_owned.count, dtype_, BoxOp::add);
  for (const Neighbour& n : neighbours_)
    if (!n.owned.empty())
      box_transfer(n.in.data(), BoxAt{n.owned.count, zeros_like(n.owned.count)}, owned_grad,
                   BoxAt{owned_dims_, n.owned.start}, n.owned.count, dtype_, BoxOp::add);
}

void HaloExchange::wait_timed(PendingCollective& pending) {
  const double begin = steady_seconds();
  pending.wait();
  const double exposed = steady_seconds() - begin;
  if (!timing_) return;
  const PendingCollective::Timing t = pending.timing();
  timing_->add(std::max(t.done - t.queued, exposed), exposed);
}

// Packs what each neighbour gets and posts every message (started, not waited for: the
// communicator drives them while the caller computes). Forward a neighbour gets the owned rows it
// reads and sends the window rows it owns; backward the window's gradient goes back the same way
// reversed.
std::unique_ptr<PendingCollective> HaloExchange::post(const void* src, bool backward) {
  const std::vector<int64_t>& src_dims = backward ? window_dims_ : owned_dims_;
  sends_.clear();
  receives_.clear();
  const int offsets = offset_count(axes_.size());
  for (Neighbour& n : neighbours_) {
    const Box& out = backward ? n.window : n.owned;
    const Box& in = backward ? n.owned : n.window;
    if (!out.empty()) {
      n.out.resize(bytes_of(out.count, dtype_));
      box_transfer(src, BoxAt{src_dims, out.start}, n.out.data(),
                   BoxAt{out.count, zeros_like(out.count)}, out.count, dtype_, BoxOp::copy);
      sends_.push_back({n.peer, tag_of(channel_, backward, n.code), n.out.data(), n.out.size()});
    }
    if (!in.empty()) {
      n.in.resize(bytes_of(in.count, dtype_));
      // The neighbour at offset o sees this rank at -o: its code mirrored.
      receives_.push_back(
          {n.peer, tag_of(channel_, backward, offsets - 1 - n.code), n.in.data(), n.in.size()});
    }
  }
  kill_if_asked(group_rank_);
  return group_->start_exchange(sends_, receives_, backward ? what_backward_ : what_forward_);
}

}  // namespace crest
