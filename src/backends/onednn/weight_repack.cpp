#include "onednn/weight_repack.hpp"

#include <algorithm>
#include <cstring>
#include <iterator>

#include "crest/core/bf16.hpp"
#include "onednn/lanes.hpp"
#include "widest_vectors.hpp"

namespace crest::onednn {

using dnnl::memory;
using Placement = WeightRepack::Placement;
using TileOrder = WeightRepack::TileOrder;
using Panel = WeightRepack::Panel;
using lanes::kLanes;
using lanes::LaneBits;
using lanes::LaneIndex;
using lanes::Lanes;

namespace {

// Below this many elements a tensor is copied by one thread: starting the team costs more.
constexpr int64_t kParallelMin = 1 << 15;
// Floats in one tile's panel (put_tile_via_panel), on the stack: 32 KB.
constexpr int64_t kMaxPanel = 8192;

inline void put(float* d, float v) { *d = v; }
inline void put(uint16_t* d, float v) { *d = float_to_bf16(v); }

// Where layout `d` puts each element, if it is a layout this file handles: 2 to 5 dims, blocked
// format, inner blocks only on dims 0 and 1 (the dims after them are walked as "taps").
std::optional<Placement> placement(const memory::desc& d) {
  if (d.get_format_kind() != memory::format_kind::blocked) return std::nullopt;
  const int nd = d.get_ndims();
  if (nd < 2 || nd > 5) return std::nullopt;
  const memory::dims dims = d.get_dims(), strides = d.get_strides();
  const memory::dims blks = d.get_inner_blks(), idxs = d.get_inner_idxs();
  Placement p;
  for (size_t k = 0; k < blks.size(); ++k) {
    if (idxs[k] > 1) return std::nullopt;
    p.block[static_cast<size_t>(idxs[k])] *= blks[k];
  }
  p.stride = {strides[0], strides[1]};
  p.offset = d.get_submemory_offset();
  // Inside the block the last listed block varies fastest; each digit of (oo, ii) takes the
  // place of its block.
  p.inner.resize(static_cast<size_t>(p.block[0] * p.block[1]));
  for (int64_t oo = 0; oo < p.block[0]; ++oo)
    for (int64_t ii = 0; ii < p.block[1]; ++ii) {
      std::array<int64_t, 2> rest{oo, ii};
      int64_t place = 0, scale = 1;
      for (size_t k = blks.size(); k-- > 0;) {
        auto& r = rest[static_cast<size_t>(idxs[k])];
        place += (r % blks[k]) * scale;
        r /= blks[k];
        scale *= blks[k];
      }
      p.inner[static_cast<size_t>(oo * p.block[1] + ii)] = place;
    }
  // Taps row-major over the spatial dims.
  p.tap = {0};
  for (int j = 2; j < nd; ++j) {
    std::vector<int64_t> next;
    for (int64_t t : p.tap)
      for (int64_t x = 0; x < dims[static_cast<size_t>(j)]; ++x)
        next.push_back(t + x * strides[static_cast<size_t>(j)]);
    p.tap = std::move(next);
  }
  return p;
}

bool is_plain(const Placement& p) { return p.block[0] == 1 && p.block[1] == 1; }

// The order inside a 16x16 block, where it is one of those with a register path (below).
TileOrder tile_order(const Placement& p) {
  if (p.block[0] != kLanes || p.block[1] != kLanes) return TileOrder::none;
  const TileOrder orders[] = {TileOrder::out_in, TileOrder::in_out, TileOrder::in_pairs,
                              TileOrder::out_pairs};
  for (TileOrder order : orders) {
    bool same = true;
    for (int64_t oo = 0; oo < kLanes; ++oo)
      for (int64_t ii = 0; ii < kLanes; ++ii) {
        int64_t place = 0;
        switch (order) {
          case TileOrder::out_in:
            place = oo * kLanes + ii;
            break;
          case TileOrder::in_out:
            place = ii * kLanes + oo;
            break;
          case TileOrder::in_pairs:
            place = ii / 2 * 2 * kLanes + oo * 2 + ii % 2;
            break;
          case TileOrder::out_pairs:
            place = oo / 2 * 2 * kLanes + ii * 2 + oo % 2;
            break;
          case TileOrder::none:
            break;
        }
        same = same && p.inner[static_cast<size_t>(oo * kLanes + ii)] == place;
      }
    if (same) return order;
  }
  return TileOrder::none;
}

// 16 rows of 16 lanes transposed in registers: four levels of swapping the off-diagonal halves
// of ever larger blocks, each row pair one two-source shuffle (vpermt2ps on AVX-512) per row.
[[gnu::always_inline]] inline void swap_blocks(Lanes (&r)[kLanes], int b, LaneIndex low,
                                               LaneIndex high) {
  for (int j = 0; j < kLanes; ++j)
    if ((j & b) == 0) {
      const Lanes x = r[j], y = r[j + b];
      r[j] = lanes::shuffle(x, y, low);
      r[j + b] = lanes::shuffle(x, y, high);
    }
}
[[gnu::always_inline]] inline void transpose(Lanes (&r)[kLanes]) {
  // Row j keeps lanes without bit b and takes row j+b's lane l-b for the others; row j+b the
  // mirror image (lane indices >= 16 select from the second row).
  swap_blocks(r, 1, LaneIndex{0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30},
              LaneIndex{1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31});
  swap_blocks(r, 2, LaneIndex{0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29},
              LaneIndex{2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31});
  swap_blocks(r, 4, LaneIndex{0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27},
              LaneIndex{4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31});
  swap_blocks(r, 8, LaneIndex{0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23},
              LaneIndex{8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31});
}

// Two rows of 16 as 16 bf16 pairs (one 64-byte line): pair l = (first[l], second[l]).
[[gnu::always_inline]] inline void store_pairs(uint16_t* d, Lanes first, Lanes second) {
  const LaneBits pairs =
      (lanes::bf16_rounded(first) >> 16) | (lanes::bf16_rounded(second) & 0xffff0000u);
  std::memcpy(d, &pairs, sizeof pairs);
}

// One full 16x16 tile (one tap), `r` holding its rows (output channels), written as `order`.
// Returns false for the orders this type has no register path for.
[[gnu::always_inline]] inline bool put_tile(Lanes (&r)[kLanes], TileOrder order, float* d) {
  if (order == TileOrder::in_out) transpose(r);
  if (order != TileOrder::in_out && order != TileOrder::out_in) return false;
  for (int k = 0; k < kLanes; ++k) lanes::store(d + k * kLanes, r[k]);
  return true;
}
[[gnu::always_inline]] inline bool put_tile(Lanes (&r)[kLanes], TileOrder order, uint16_t* d) {
  if (order == TileOrder::in_out || order == TileOrder::in_pairs) transpose(r);
  if (order == TileOrder::in_out || order == TileOrder::out_in) {
    for (int k = 0; k < kLanes; ++k) lanes::store(d + k * kLanes, r[k]);
    return true;
  }
  if (order == TileOrder::none) return false;
  for (int64_t k = 0; k < kLanes / 2; ++k) store_pairs(d + k * 2 * kLanes, r[2 * k], r[2 * k + 1]);
  return true;
}

// One full tile (ob, ib), all taps, through a panel: its rows copied side by side first, each
// read once front to back. Read in place, a 64-row tile of a 3x3 kernel (AcdB64a2b, brgconv's
// forward layout) has its rows 2048 x 9 floats apart, a multiple of 4 KB: all 64 fall in one
// L1 set and evict each other between taps. DeepCAM's aspp2 forward bridge: 2.8 -> 1.9 ms.
template <typename To>
[[gnu::always_inline]] inline void put_tile_via_panel(const float* src, To* dst, int64_t ob,
                                                      int64_t ib, const Placement& plain,
                                                      const Placement& blocked,
                                                      const Panel& panel) {
  const int64_t bo = blocked.block[0], bi = blocked.block[1], size = bo * bi;
  alignas(64) float rows[kMaxPanel];
  const float* s = src + plain.offset + ob * bo * plain.stride[0] + ib * bi * plain.stride[1];
  for (int64_t oo = 0; oo < bo; ++oo)
    std::memcpy(rows + oo * panel.row, s + oo * plain.stride[0],
                static_cast<size_t>(panel.row) * sizeof(float));
  for (size_t t = 0; t < blocked.tap.size(); ++t) {
    const float* from = rows + plain.tap[t];
    To* d = dst + blocked.offset + ob * blocked.stride[0] + ib * blocked.stride[1] + blocked.tap[t];
#pragma omp simd
    for (int64_t k = 0; k < size; ++k) put(d + k, from[panel.gather[k]]);
  }
}

#define CREST_WIDEST_VECTORS_LOOPS "onednn/weight_repack.inc"
#include "widest_vectors_expand.hpp"

}  // namespace

std::optional<WeightRepack> WeightRepack::plan(const memory::desc& from, const memory::desc& to) {
  using dt = memory::data_type;
  const memory::dims dims = from.get_dims();
  if (dims != to.get_dims() || dims.size() < 2 || from.get_data_type() != dt::f32)
    return std::nullopt;
  // The tables hold offsets inside one tile as 32-bit integers: beyond 2^31 elements per tensor
  // (8 GB of float32 weights) oneDNN's reorder does it.
  int64_t elements = 1;
  for (memory::dim x : dims) elements *= x;
  const auto padded = static_cast<int64_t>(std::max(from.get_size(), to.get_size()) / 2);
  if (std::max(elements, padded) >= (int64_t{1} << 31)) return std::nullopt;
  const auto f = placement(from), t = placement(to);
  if (!f || !t) return std::nullopt;
  WeightRepack r;
  r.out_ = dims.front();
  r.in_ = *std::next(dims.begin());
  const auto taps = static_cast<int64_t>(f->tap.size());
  if (is_plain(*f) && !is_plain(*t) &&
      (to.get_data_type() == dt::f32 || to.get_data_type() == dt::bf16)) {
    r.direction_ = Direction::to_blocked;
    r.bf16_ = to.get_data_type() == dt::bf16;
    r.plain_ = *f;
    r.blocked_ = *t;
    r.order_ = tile_order(*t);
    r.gather_.assign(t->inner.size(), 0);
    for (int64_t oo = 0; oo < t->block[0]; ++oo)
      for (int64_t ii = 0; ii < t->block[1]; ++ii)
        r.gather_[static_cast<size_t>(t->inner[static_cast<size_t>(oo * t->block[1] + ii)])] =
            static_cast<int32_t>(oo * f->stride[0] + ii * f->stride[1]);
    r.plan_panel(*f, *t);
    return r;
  }
  // The plain destination must be crest's dense [out][in][taps] with no offset.
  const bool dense =
      is_plain(*t) && t->offset == 0 && t->stride[1] == taps && t->stride[0] == r.in_ * taps;
  bool taps_dense = true;
  for (int64_t k = 0; k < taps; ++k) taps_dense = taps_dense && t->tap[static_cast<size_t>(k)] == k;
  if (!is_plain(*f) && dense && taps_dense && to.get_data_type() == dt::f32) {
    r.direction_ = Direction::to_plain;
    r.plain_ = *t;
    r.blocked_ = *f;
    r.order_ = tile_order(*f);
    const int64_t bo = f->block[0], bi = f->block[1];
    r.gather_.assign(static_cast<size_t>(bo * bi * taps), 0);
    for (int64_t oo = 0; oo < bo; ++oo)
      for (int64_t ii = 0; ii < bi; ++ii)
        for (int64_t k = 0; k < taps; ++k)
          r.gather_[static_cast<size_t>((oo * bi + ii) * taps + k)] = static_cast<int32_t>(
              f->inner[static_cast<size_t>(oo * bi + ii)] + f->tap[static_cast<size_t>(k)]);
    return r;
  }
  return std::nullopt;
}

// Tiles of many rows (more than 4) whose taps are not on a register path go through a panel,
// where a row's span (the tile's input channels and taps) is short enough to copy: at most 4
// times the elements the tile uses (a window's rows carry the dead taps between live ones).
void WeightRepack::plan_panel(const Placement& plain, const Placement& blocked) {
  const auto taps = static_cast<int64_t>(blocked.tap.size());
  const int64_t bo = blocked.block[0], bi = blocked.block[1];
  const int64_t last_tap = *std::max_element(plain.tap.begin(), plain.tap.end());
  const int64_t row = (bi - 1) * plain.stride[1] + last_tap + 1;
  const bool on_registers = taps == 1 && order_ != TileOrder::none;
  if (bo <= 4 || on_registers || plain.stride[1] < 1 || row > 4 * bi * taps || bo * row > kMaxPanel)
    return;
  panel_row_ = row;
  panel_gather_.assign(blocked.inner.size(), 0);
  for (int64_t oo = 0; oo < bo; ++oo)
    for (int64_t ii = 0; ii < bi; ++ii)
      panel_gather_[static_cast<size_t>(blocked.inner[static_cast<size_t>(oo * bi + ii)])] =
          static_cast<int32_t>(oo * row + ii * plain.stride[1]);
}

void WeightRepack::run(const void* from, void* to) const {
  const auto* src = static_cast<const float*>(from);
  const Panel panel{panel_row_, panel_gather_.data()};
  if (direction_ == Direction::to_plain) {
    CREST_WIDEST_VECTORS_CALL(to_plain, src, static_cast<float*>(to), out_, in_, blocked_,
                              gather_.data(), order_);
  } else if (bf16_) {
    CREST_WIDEST_VECTORS_CALL(to_blocked, src, static_cast<uint16_t*>(to), out_, in_, plain_,
                              blocked_, gather_.data(), order_, panel);
  } else {
    CREST_WIDEST_VECTORS_CALL(to_blocked, src, static_cast<float*>(to), out_, in_, plain_, blocked_,
                              gather_.data(), order_, panel);
  }
}

}  // namespace crest::onednn
