// BoundaryPieces (boundary_pieces.hpp): the boundary of a split window layer's outputs, its
// pieces and their windows.
#include "crest/spatial/boundary_pieces.hpp"

#include "crest/spatial/spatial_window.hpp"

namespace crest {

std::vector<int64_t> block_dims(int64_t n, int64_t channels, const std::vector<int64_t>& rows,
                                Layout layout) {
  const bool last = layout == Layout::channels_last;
  std::vector<int64_t> dims{n};
  if (!last) dims.push_back(channels);
  dims.insert(dims.end(), rows.begin(), rows.end());
  if (last) dims.push_back(channels);
  return dims;
}

int spatial_dim(int axis, Layout layout) {
  return axis + (layout == Layout::channels_last ? 1 : 2);
}

void move_box(const void* src, const std::vector<int64_t>& src_dims, const ArrayBox& from,
              void* dst, const std::vector<int64_t>& dst_dims, const ArrayBox& to, DType dtype,
              BoxOp op) {
  box_transfer(src, BoxAt{src_dims, from.start}, dst, BoxAt{dst_dims, to.start}, from.count, dtype,
               op);
}

size_t dense_bytes(const std::vector<int64_t>& dims, DType dtype) {
  size_t n = dtype_size(dtype);
  for (int64_t d : dims) n *= static_cast<size_t>(d);
  return n;
}

namespace {

using Axis = BoundaryPieces::Axis;

// The box of an array of extents `dims` spanning `rows` (global, one range per moving axis)
// along each moving axis (`dim_of` its dim there, `origin[i]` the array's first row) and every
// row of the other dims.
ArrayBox box_of(const std::vector<int64_t>& dims, const std::vector<Axis>& axes, int Axis::*dim_of,
                const std::vector<IndexRange>& rows, const std::vector<int64_t>& origin) {
  ArrayBox b{std::vector<int64_t>(dims.size(), 0), dims};
  for (size_t i = 0; i < axes.size(); ++i) {
    const auto d = static_cast<size_t>(axes[i].*dim_of);
    b.start[d] = rows[i].begin - origin[i];
    b.count[d] = rows[i].size();
  }
  return b;
}

std::vector<int64_t> firsts(const std::vector<IndexRange>& rows) {
  std::vector<int64_t> f;
  f.reserve(rows.size());
  for (IndexRange r : rows) f.push_back(r.begin);
  return f;
}

// dist.halo_overlap auto overlaps where the boundary is at most 1/32 of a rank's outputs, so
// that the outputs computed twice add at most ~3 % to the layer's arithmetic: on a 2-core
// machine, whose shared-memory exchanges take 1-15 ms, larger boundaries (CosmoFlow's conv3 to
// conv5 at 128^3 split 2 ways: 1/16 to 1/4) made the layers slower than the exchange they hid
// (docs/performance.md).
constexpr int64_t kAutoBoundaryShare = 32;

// Output rows of `owned` that read any of `halo`, from the `lower` end or the upper: rows_read
// grows with the row, so they form a prefix (lower neighbour) or a suffix (upper).
IndexRange reading(const WindowAxis& w, IndexRange owned, IndexRange halo, bool lower) {
  auto reads = [&](int64_t o) { return !intersect(rows_read(w, {o, o + 1}), halo).empty(); };
  IndexRange r = lower ? IndexRange{owned.begin, owned.begin} : IndexRange{owned.end, owned.end};
  if (halo.empty()) return r;
  if (lower)
    while (r.end < owned.end && reads(r.end)) ++r.end;
  else
    while (r.begin > owned.begin && reads(r.begin - 1)) --r.begin;
  return r;
}

// One moving axis's boundary: the output rows reading the lower and the upper neighbour's rows.
struct AxisBoundary {
  IndexRange lower, upper;
  IndexRange interior() const { return {lower.end, upper.begin}; }
};

std::vector<AxisBoundary> boundaries_of(const BoundaryPieces::Layer& l) {
  std::vector<AxisBoundary> out;
  const auto& grid_axes = l.halo.moving_grid_axes();
  for (size_t i = 0; i < grid_axes.size(); ++i) {
    const AxisPlan& p = l.halo.moving_axes()[i].plan;
    const WindowAxis& axis = l.windows[static_cast<size_t>(grid_axes[i])];
    out.push_back({reading(axis, p.owned_out, p.from_lower, true),
                   reading(axis, p.owned_out, p.from_upper, false)});
  }
  return out;
}

// Why the layer cannot overlap its exchange ("" where it can); `b`: each moving axis's boundary.
std::string why_not_overlapped(const BoundaryPieces::Layer& l, HaloOverlapMode mode,
                               const std::vector<AxisBoundary>& b) {
  if (mode == HaloOverlapMode::off) return "not overlapped: dist.halo_overlap is off";
  if (!l.halo.moves_rows()) return "no halo";
  const int rank = static_cast<int>(l.windows.size());
  int64_t outputs = 1, interior = 1;
  for (size_t i = 0; i < b.size(); ++i) {
    const AxisPlan& p = l.halo.moving_axes()[i].plan;
    const std::string along = " along " + spatial_axis_name(rank, l.halo.moving_grid_axes()[i]);
    if (b[i].interior().empty())
      return "not overlapped: no output row of " + str(p.owned_out) + along +
             " reads only this rank's rows";
    outputs *= p.owned_out.size();
    interior *= b[i].interior().size();
  }
  const int64_t boundary = outputs - interior;
  if (mode == HaloOverlapMode::automatic && kAutoBoundaryShare * boundary > outputs)
    return "not overlapped: the boundary is " + std::to_string(boundary) + " of " +
           std::to_string(outputs) + " outputs (more than 1/" + std::to_string(kAutoBoundaryShare) +
           "; exchange, then compute)";
  return "";
}

// The pieces' output rows: per moving axis a and end, the boundary rows along a, the interior
// along the axes before a (their boundaries are earlier pieces'), every row along those after.
std::vector<std::vector<IndexRange>> piece_outputs(const std::vector<Axis>& axes,
                                                   const std::vector<AxisBoundary>& b) {
  std::vector<std::vector<IndexRange>> pieces;
  for (size_t a = 0; a < axes.size(); ++a)
    for (IndexRange end : {b[a].lower, b[a].upper}) {
      if (end.empty()) continue;
      std::vector<IndexRange> out;
      for (size_t i = 0; i < axes.size(); ++i)
        out.push_back(i < a ? b[i].interior() : i == a ? end : axes[i].owned_out);
      pieces.push_back(std::move(out));
    }
  return pieces;
}

std::string interior_text(const std::vector<Axis>& axes, const std::vector<AxisBoundary>& b,
                          int spatial_rank) {
  std::string t;
  for (size_t i = 0; i < axes.size(); ++i) {
    if (b[i].lower.empty() && b[i].upper.empty()) continue;
    t += (t.empty() ? "" : ", ") + str(b[i].interior()) + " of " + str(axes[i].owned_out) +
         " along " + spatial_axis_name(spatial_rank, axes[i].spatial);
  }
  return t;
}

}  // namespace

std::unique_ptr<BoundaryPieces> BoundaryPieces::make(const Layer& l, HaloOverlapMode mode,
                                                     std::string& why_not) {
  const std::vector<AxisBoundary> ends =
      l.halo.moves_rows() ? boundaries_of(l) : std::vector<AxisBoundary>{};
  why_not = why_not_overlapped(l, mode, ends);
  if (!why_not.empty()) return nullptr;
  std::unique_ptr<BoundaryPieces> b(new BoundaryPieces());
  b->window_dims_ = l.halo.window_dims();
  b->dst_dims_ = block_dims(l.n, l.out_channels, l.out_rows, l.dst_layout);
  std::vector<int64_t> window_origin, dst_origin;
  for (size_t i = 0; i < ends.size(); ++i) {
    const HaloExchange::Axis& m = l.halo.moving_axes()[i];
    const int spatial = l.halo.moving_grid_axes()[i];
    b->axes_.push_back({.spatial = spatial,
                        .src_dim = m.dim,
                        .dst_dim = spatial_dim(spatial, l.dst_layout),
                        .window = m.plan.window,
                        .owned_out = m.plan.owned_out,
                        .own_in = intersect(m.plan.owned_in, m.plan.window)});
    window_origin.push_back(m.plan.window.begin);
    dst_origin.push_back(m.plan.owned_out.begin);
  }
  const std::vector<Axis>& axes = b->axes_;
  for (const auto& out : piece_outputs(axes, ends)) {
    Piece p;
    p.out = out;
    std::vector<int64_t> in_rows = l.out_rows, out_rows = l.out_rows;
    for (size_t d = 0; d < in_rows.size(); ++d)
      in_rows[d] =
          l.halo.window_dims()[static_cast<size_t>(spatial_dim(static_cast<int>(d), l.src_layout))];
    std::vector<IndexRange> own;
    for (size_t i = 0; i < axes.size(); ++i) {
      const WindowAxis& w = l.windows[static_cast<size_t>(axes[i].spatial)];
      const IndexRange window = intersect(rows_read(w, out[i]), {0, w.in_extent});
      const LocalPadding pad = local_padding(w, window, out[i]);
      if (pad.lo < 0 || pad.hi < 0) {
        why_not = "not overlapped: a boundary window would need negative padding";
        return nullptr;
      }
      p.window.push_back(window);
      p.pad.push_back(pad);
      own.push_back(intersect(axes[i].own_in, window));
      in_rows[static_cast<size_t>(axes[i].spatial)] = window.size();
      out_rows[static_cast<size_t>(axes[i].spatial)] = out[i].size();
    }
    p.window_dims = block_dims(l.n, l.in_channels, in_rows, l.src_layout);
    p.out_dims = block_dims(l.n, l.out_channels, out_rows, l.dst_layout);
    p.in_window = box_of(b->window_dims_, axes, &Axis::src_dim, p.window, window_origin);
    p.window_box = box_of(p.window_dims, axes, &Axis::src_dim, p.window, firsts(p.window));
    p.own_rows = box_of(p.window_dims, axes, &Axis::src_dim, own, firsts(p.window));
    p.out_box = box_of(p.out_dims, axes, &Axis::dst_dim, out, firsts(out));
    p.in_dst = box_of(b->dst_dims_, axes, &Axis::dst_dim, out, dst_origin);
    b->pieces_.push_back(std::move(p));
  }
  b->description_ = "overlapped: the interior rows " +
                    interior_text(axes, ends, static_cast<int>(l.windows.size())) +
                    " computed while the halo travels";
  return b;
}

void BoundaryPieces::window_in(size_t i, const void* window, void* piece_window,
                               DType dtype) const {
  const Piece& p = pieces_[i];
  move_box(window, window_dims_, p.in_window, piece_window, p.window_dims, p.window_box, dtype,
           BoxOp::copy);
}

void BoundaryPieces::out_to(size_t i, const void* piece_out, void* dst, DType dtype) const {
  const Piece& p = pieces_[i];
  move_box(piece_out, p.out_dims, p.out_box, dst, dst_dims_, p.in_dst, dtype, BoxOp::copy);
}

void BoundaryPieces::out_in(size_t i, const void* diff_dst, void* piece_out, DType dtype) const {
  const Piece& p = pieces_[i];
  move_box(diff_dst, dst_dims_, p.in_dst, piece_out, p.out_dims, p.out_box, dtype, BoxOp::copy);
}

void BoundaryPieces::window_add(size_t i, const void* piece_window, void* window_grad,
                                DType dtype) const {
  const Piece& p = pieces_[i];
  move_box(piece_window, p.window_dims, p.window_box, window_grad, window_dims_, p.in_window, dtype,
           BoxOp::add);
}

}  // namespace crest
