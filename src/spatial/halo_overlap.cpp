// ConvBoundaries (halo_overlap.hpp): the boundary rows of a split convolution, their windows and
// kernels, and the three passes over them.
#include "crest/spatial/halo_overlap.hpp"

#include <algorithm>
#include <cstring>

#include "crest/core/box_copy.hpp"
#include "crest/core/error.hpp"
#include "crest/spatial/spatial_window.hpp"

namespace crest {

HaloOverlapMode parse_halo_overlap(const std::string& text, const std::string& key) {
  if (text == "auto") return HaloOverlapMode::automatic;
  if (text == "always") return HaloOverlapMode::always;
  if (text == "off") return HaloOverlapMode::off;
  throw_usage(key + ": '" + text + "' is not one of auto, always, off");
}

std::string halo_overlap_name(HaloOverlapMode mode) {
  switch (mode) {
    case HaloOverlapMode::off:
      return "off";
    case HaloOverlapMode::always:
      return "always";
    case HaloOverlapMode::automatic:
      break;
  }
  return "auto";
}

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

namespace {

// Whole-array boxes of transfers between the window, the output block and a piece's arrays.
struct Box {
  std::vector<int64_t> start, count;
};

// The box of an array of extents `dims` spanning `rows` (global, one range per moving axis)
// along each moving axis (`dim_of(axis)` its dim there, `origin[i]` the array's first row) and
// every row of the other dims.
Box box_of(const std::vector<int64_t>& dims, const std::vector<ConvBoundaries::Axis>& axes,
           int ConvBoundaries::Axis::*dim_of, const std::vector<IndexRange>& rows,
           const std::vector<int64_t>& origin) {
  Box b{std::vector<int64_t>(dims.size(), 0), dims};
  for (size_t i = 0; i < axes.size(); ++i) {
    const auto d = static_cast<size_t>(axes[i].*dim_of);
    b.start[d] = rows[i].begin - origin[i];
    b.count[d] = rows[i].size();
  }
  return b;
}

void move_box(const void* src, const std::vector<int64_t>& src_dims, const Box& from, void* dst,
              const std::vector<int64_t>& dst_dims, const Box& to, DType dtype, BoxOp op) {
  box_transfer(src, BoxAt{src_dims, from.start}, dst, BoxAt{dst_dims, to.start}, from.count, dtype,
               op);
}

std::vector<int64_t> firsts(const std::vector<IndexRange>& rows) {
  std::vector<int64_t> f;
  f.reserve(rows.size());
  for (IndexRange r : rows) f.push_back(r.begin);
  return f;
}

void add_into(void* acc, const void* part, int64_t n, DType dtype) {
  if (dtype == DType::f64) {
    for (int64_t i = 0; i < n; ++i)
      static_cast<double*>(acc)[i] += static_cast<const double*>(part)[i];
    return;
  }
  CREST_CHECK(dtype == DType::f32, "split weight gradients are float32 or float64");
  for (int64_t i = 0; i < n; ++i) static_cast<float*>(acc)[i] += static_cast<const float*>(part)[i];
}

size_t bytes_of(const std::vector<int64_t>& dims, DType dtype) {
  size_t n = dtype_size(dtype);
  for (int64_t d : dims) n *= static_cast<size_t>(d);
  return n;
}

std::vector<int64_t> extents(const std::array<int64_t, 3>& size, int spatial_rank) {
  return std::vector<int64_t>(size.begin(), size.begin() + spatial_rank);
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

std::vector<AxisBoundary> boundaries_of(const ConvBoundaries::Layer& l) {
  std::vector<AxisBoundary> out;
  const std::vector<WindowAxis> w = window_axes(l.global);
  const auto& grid_axes = l.halo.moving_grid_axes();
  for (size_t i = 0; i < grid_axes.size(); ++i) {
    const AxisPlan& p = l.halo.moving_axes()[i].plan;
    const WindowAxis& axis = w[static_cast<size_t>(grid_axes[i])];
    out.push_back({reading(axis, p.owned_out, p.from_lower, true),
                   reading(axis, p.owned_out, p.from_upper, false)});
  }
  return out;
}

}  // namespace

// One piece of the boundary shell: its output rows and the window they read along each moving
// axis, the kernel on that window, and the layout of its transient memory (piece window, piece
// output, the kernel-format copies of both, the kernel's scratch, a weight gradient).
struct ConvBoundaries::Piece {
  std::vector<IndexRange> out, window;  // global rows per moving axis
  // Its window in the layer's window and in its own array, this rank's own rows in the latter,
  // and its output in its own array and in the output block.
  Box in_window, window_box, own_rows, out_box, in_dst;
  std::unique_ptr<ConvKernel> kernel;
  std::unique_ptr<FormatBridge> src, dst;
  std::vector<int64_t> window_dims, out_dims;
  std::array<size_t, 7> offset{};
  struct Slices {
    std::byte *window, *out, *src, *dst, *kernel, *dw;
  };
  Slices at(void* scratch) const {
    auto* b = static_cast<std::byte*>(scratch);
    return {b + offset[0], b + offset[1], b + offset[2],
            b + offset[3], b + offset[4], b + offset[5]};
  }
};

ConvBoundaries::~ConvBoundaries() = default;

namespace {

// Why the layer cannot overlap its exchange ("" where it can); `b`: each moving axis's boundary.
std::string why_not_overlapped(const ConvBoundaries::Layer& l, HaloOverlapMode mode,
                               const std::vector<AxisBoundary>& b) {
  if (mode == HaloOverlapMode::off) return "not overlapped: dist.halo_overlap is off";
  if (!l.halo.moves_rows()) return "no halo";
  int64_t outputs = 1, interior = 1;
  for (size_t i = 0; i < b.size(); ++i) {
    const AxisPlan& p = l.halo.moving_axes()[i].plan;
    const std::string along =
        " along " + spatial_axis_name(l.global.spatial_rank, l.halo.moving_grid_axes()[i]);
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

}  // namespace

std::unique_ptr<ConvBoundaries::Piece> ConvBoundaries::make_piece(
    Backend& backend, const Layer& l, const std::vector<IndexRange>& out) {
  const std::vector<WindowAxis> w = window_axes(l.global);
  auto s = std::make_unique<Piece>();
  s->out = out;
  ConvDesc d = l.local;
  for (size_t i = 0; i < axes_.size(); ++i) {
    const auto a = static_cast<size_t>(axes_[i].spatial);
    const IndexRange window = intersect(rows_read(w[a], out[i]), {0, w[a].in_extent});
    const LocalPadding pad = local_padding(w[a], window, out[i]);
    if (pad.lo < 0 || pad.hi < 0) return nullptr;
    s->window.push_back(window);
    d.in_size[a] = window.size();
    d.out_size[a] = out[i].size();
    d.pad_lo[a] = pad.lo;
    d.pad_hi[a] = pad.hi;
  }
  d.bias_grad = false;  // the whole kernel computes the bias gradient once
  const std::vector<int64_t> in_rows = extents(d.in_size, d.spatial_rank);
  s->window_dims = block_dims(d.n, d.in_channels, in_rows, l.src_layout);
  s->out_dims = block_dims(d.n, d.out_channels, extents(d.out_size, d.spatial_rank), l.dst_layout);
  std::vector<int64_t> window_origin, dst_origin;
  std::vector<IndexRange> own;
  for (size_t i = 0; i < axes_.size(); ++i) {
    window_origin.push_back(axes_[i].window.begin);
    dst_origin.push_back(axes_[i].owned_out.begin);
    own.push_back(intersect(axes_[i].own_in, s->window[i]));
  }
  s->in_window = box_of(window_dims_, axes_, &Axis::src_dim, s->window, window_origin);
  s->window_box = box_of(s->window_dims, axes_, &Axis::src_dim, s->window, firsts(s->window));
  s->own_rows = box_of(s->window_dims, axes_, &Axis::src_dim, own, firsts(s->window));
  s->out_box = box_of(s->out_dims, axes_, &Axis::dst_dim, out, firsts(out));
  s->in_dst = box_of(dst_dims_, axes_, &Axis::dst_dim, out, dst_origin);
  s->kernel =
      backend.conv(d, plain_format(Shape(block_dims(d.n, d.in_channels, in_rows, Layout::plain)),
                                   d.dtype, l.src_layout));
  s->src = std::make_unique<FormatBridge>(backend, s->kernel->src_format(), l.src_layout);
  s->dst = std::make_unique<FormatBridge>(backend, s->kernel->dst_format(), l.dst_layout);
  const size_t sizes[] = {bytes_of(s->window_dims, d.dtype),
                          bytes_of(s->out_dims, d.dtype),
                          s->src->bytes(),
                          s->dst->bytes(),
                          s->kernel->scratch_bytes(),
                          static_cast<size_t>(weight_count_) * dtype_size(d.dtype)};
  for (size_t i = 0; i < 6; ++i) s->offset[i + 1] = s->offset[i] + align_up(sizes[i], 256);
  return s;
}

namespace {

// The pieces' output rows: per moving axis a and end, the boundary rows along a, the interior
// along the axes before a (their boundaries are earlier pieces'), every row along those after.
std::vector<std::vector<IndexRange>> piece_outputs(const std::vector<ConvBoundaries::Axis>& axes,
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

std::string interior_text(const std::vector<ConvBoundaries::Axis>& axes,
                          const std::vector<AxisBoundary>& b, int spatial_rank) {
  std::string t;
  for (size_t i = 0; i < axes.size(); ++i) {
    if (b[i].lower.empty() && b[i].upper.empty()) continue;
    t += (t.empty() ? "" : ", ") + str(b[i].interior()) + " of " + str(axes[i].owned_out) +
         " along " + spatial_axis_name(spatial_rank, axes[i].spatial);
  }
  return t;
}

}  // namespace

std::unique_ptr<ConvBoundaries> ConvBoundaries::make(Backend& backend, const Layer& l,
                                                     HaloOverlapMode mode, std::string& why_not) {
  const std::vector<AxisBoundary> ends =
      l.halo.moves_rows() ? boundaries_of(l) : std::vector<AxisBoundary>{};
  why_not = why_not_overlapped(l, mode, ends);
  if (!why_not.empty()) return nullptr;
  const ConvDesc& local = l.local;
  std::unique_ptr<ConvBoundaries> b(new ConvBoundaries());
  b->dtype_ = local.dtype;
  b->window_dims_ = l.halo.window_dims();
  b->dst_dims_ = block_dims(local.n, local.out_channels,
                            extents(local.out_size, local.spatial_rank), l.dst_layout);
  for (size_t i = 0; i < ends.size(); ++i) {
    const HaloExchange::Axis& m = l.halo.moving_axes()[i];
    const int spatial = l.halo.moving_grid_axes()[i];
    b->axes_.push_back({.spatial = spatial,
                        .src_dim = m.dim,
                        .dst_dim = spatial_dim(spatial, l.dst_layout),
                        .window = m.plan.window,
                        .owned_out = m.plan.owned_out,
                        .own_in = intersect(m.plan.owned_in, m.plan.window)});
  }
  b->weight_count_ = local.out_channels * local.in_channels / local.groups;
  for (int i = 0; i < local.spatial_rank; ++i) b->weight_count_ *= local.kernel[size_t(i)];
  for (const auto& out : piece_outputs(b->axes_, ends)) {
    auto piece = b->make_piece(backend, l, out);
    if (!piece) {
      why_not = "not overlapped: a boundary window would need negative padding";
      return nullptr;
    }
    // A boundary window is a small, oddly padded problem: where oneDNN has only its reference
    // code for it (a transposed convolution's weight gradient on DeepCAM's 2-row boundaries
    // took 2 s against 0.1 s for the whole layer), redoing the boundary costs far more than the
    // exchange it would hide.
    if (runs_reference_code(*piece->kernel)) {
      why_not = "not overlapped: a boundary kernel would run oneDNN's reference code (" +
                piece->kernel->implementation() + ")";
      return nullptr;
    }
    b->scratch_bytes_ = std::max(b->scratch_bytes_, piece->offset[6]);
    b->pieces_.push_back(std::move(piece));
  }
  b->description_ = "overlapped: the interior rows " +
                    interior_text(b->axes_, ends, local.spatial_rank) +
                    " computed while the halo travels";
  return b;
}

void ConvBoundaries::forward(const void* window, const void* weights, const void* bias, void* dst,
                             void* scratch) {
  for (const auto& s : pieces_) {
    const Piece::Slices m = s->at(scratch);
    move_box(window, window_dims_, s->in_window, m.window, s->window_dims, s->window_box, dtype_,
             BoxOp::copy);
    s->kernel->forward(s->src->to_kernel(m.window, m.src), weights, bias,
                       s->dst->kernel_buffer(m.out, m.dst), m.kernel);
    s->dst->to_plain(m.dst, m.out);
    move_box(m.out, s->out_dims, s->out_box, dst, dst_dims_, s->in_dst, dtype_, BoxOp::copy);
  }
}

// The pieces partition the outputs that read the halo, so their window gradients summed are the
// halo rows' gradient.
void ConvBoundaries::backward_halo(const void* diff_dst, const void* weights, void* window_grad,
                                   void* scratch) {
  std::memset(window_grad, 0, bytes_of(window_dims_, dtype_));
  for (const auto& s : pieces_) {
    const Piece::Slices m = s->at(scratch);
    move_box(diff_dst, dst_dims_, s->in_dst, m.out, s->out_dims, s->out_box, dtype_, BoxOp::copy);
    s->kernel->backward_data(s->dst->to_kernel(m.out, m.dst), weights,
                             s->src->kernel_buffer(m.window, m.src), m.kernel);
    s->src->to_plain(m.src, m.window);
    move_box(m.window, s->window_dims, s->window_box, window_grad, window_dims_, s->in_window,
             dtype_, BoxOp::add);
  }
}

void ConvBoundaries::add_halo_weight_grad(const void* window, const void* diff_dst,
                                          void* diff_weights, void* scratch) {
  for (const auto& s : pieces_) {
    const Piece::Slices m = s->at(scratch);
    move_box(window, window_dims_, s->in_window, m.window, s->window_dims, s->window_box, dtype_,
             BoxOp::copy);
    // Own rows: the whole kernel counted them.
    move_box(nullptr, s->window_dims, s->own_rows, m.window, s->window_dims, s->own_rows, dtype_,
             BoxOp::zero);
    move_box(diff_dst, dst_dims_, s->in_dst, m.out, s->out_dims, s->out_box, dtype_, BoxOp::copy);
    s->kernel->backward_weights(s->src->to_kernel(m.window, m.src), s->dst->to_kernel(m.out, m.dst),
                                m.dw, nullptr, m.kernel);
    add_into(diff_weights, m.dw, weight_count_, dtype_);
  }
}

}  // namespace crest
