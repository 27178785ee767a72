#include "onednn/weight_repack.hpp"

#include <cstring>
#include <iterator>

#include "onednn/widest_vectors.hpp"

namespace crest::onednn {

using dnnl::memory;
using Placement = WeightRepack::Placement;

namespace {

// Below this many elements a tensor is copied by one thread: starting the team costs more.
constexpr int64_t kParallelMin = 1 << 15;

// crest::float_to_bf16 without the branch, so that it vectorises: the same bits.
inline uint16_t bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  const uint32_t rounded = u + 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(((u & 0x7fffffffu) > 0x7f800000u ? (u | 0x400000u) : rounded) >> 16);
}
inline void put(float* d, float v) { *d = v; }
inline void put(uint16_t* d, float v) { *d = bf16_bits(v); }

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

// Plain -> blocked: each tile (ob, ib) and tap t is one contiguous block of the destination.
template <typename To>
CREST_WIDEST_VECTORS void to_blocked(const float* src, To* dst, int64_t out, int64_t in,
                                     const Placement& plain, const Placement& blocked,
                                     const int32_t* gather) {
  const int64_t bo = blocked.block[0], bi = blocked.block[1], size = bo * bi;
  const int64_t tiles_o = (out + bo - 1) / bo, tiles_i = (in + bi - 1) / bi;
  const auto taps = static_cast<int64_t>(blocked.tap.size());
#pragma omp parallel for collapse(2) schedule(static) if (out * in * taps >= kParallelMin)
  for (int64_t ob = 0; ob < tiles_o; ++ob)
    for (int64_t ib = 0; ib < tiles_i; ++ib) {
      const bool full = (ob + 1) * bo <= out && (ib + 1) * bi <= in;
      for (int64_t t = 0; t < taps; ++t) {
        const float* s = src + plain.offset + ob * bo * plain.stride[0] +
                         ib * bi * plain.stride[1] + plain.tap[static_cast<size_t>(t)];
        To* d = dst + blocked.offset + ob * blocked.stride[0] + ib * blocked.stride[1] +
                blocked.tap[static_cast<size_t>(t)];
        if (full) {
#pragma omp simd
          for (int64_t k = 0; k < size; ++k) put(d + k, s[gather[k]]);
          continue;
        }
        for (int64_t oo = 0; oo < bo; ++oo)  // an edge tile: the padding gets zeros
          for (int64_t ii = 0; ii < bi; ++ii) {
            const bool inside = ob * bo + oo < out && ib * bi + ii < in;
            put(d + blocked.inner[static_cast<size_t>(oo * bi + ii)],
                inside ? s[oo * plain.stride[0] + ii * plain.stride[1]] : 0.f);
          }
      }
    }
}

// Blocked -> dense plain [out][in][taps]: each output channel of a tile is one contiguous run
// of in-block x taps elements.
CREST_WIDEST_VECTORS void to_plain(const float* src, float* dst, int64_t out, int64_t in,
                                   const Placement& blocked, const int32_t* gather) {
  const int64_t bo = blocked.block[0], bi = blocked.block[1];
  const auto taps = static_cast<int64_t>(blocked.tap.size());
  const int64_t tiles_o = (out + bo - 1) / bo, tiles_i = (in + bi - 1) / bi, run = bi * taps;
#pragma omp parallel for collapse(2) schedule(static) if (out * in * taps >= kParallelMin)
  for (int64_t ob = 0; ob < tiles_o; ++ob)
    for (int64_t ib = 0; ib < tiles_i; ++ib) {
      const float* s = src + blocked.offset + ob * blocked.stride[0] + ib * blocked.stride[1];
      const bool full = (ob + 1) * bo <= out && (ib + 1) * bi <= in;
      for (int64_t oo = 0; oo < bo && ob * bo + oo < out; ++oo) {
        float* d = dst + ((ob * bo + oo) * in + ib * bi) * taps;
        const int32_t* g = gather + oo * run;
        if (full) {
#pragma omp simd
          for (int64_t j = 0; j < run; ++j) d[j] = s[g[j]];
          continue;
        }
        for (int64_t j = 0; j < run && ib * bi + j / taps < in; ++j) d[j] = s[g[j]];
      }
    }
}

}  // namespace

std::optional<WeightRepack> WeightRepack::plan(const memory::desc& from, const memory::desc& to) {
  using dt = memory::data_type;
  const memory::dims dims = from.get_dims();
  if (dims != to.get_dims() || dims.size() < 2 || from.get_data_type() != dt::f32)
    return std::nullopt;
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
    r.gather_.assign(t->inner.size(), 0);
    for (int64_t oo = 0; oo < t->block[0]; ++oo)
      for (int64_t ii = 0; ii < t->block[1]; ++ii)
        r.gather_[static_cast<size_t>(t->inner[static_cast<size_t>(oo * t->block[1] + ii)])] =
            static_cast<int32_t>(oo * f->stride[0] + ii * f->stride[1]);
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

void WeightRepack::run(const void* from, void* to) const {
  const auto* src = static_cast<const float*>(from);
  if (direction_ == Direction::to_plain) {
    to_plain(src, static_cast<float*>(to), out_, in_, blocked_, gather_.data());
  } else if (bf16_) {
    to_blocked(src, static_cast<uint16_t*>(to), out_, in_, plain_, blocked_, gather_.data());
  } else {
    to_blocked(src, static_cast<float*>(to), out_, in_, plain_, blocked_, gather_.data());
  }
}

}  // namespace crest::onednn
