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

// The rows `rows` (global) along `dim` of an array whose first row there is `origin`, into the
// same rows of another such array (copied).
struct Rows {
  const std::vector<int64_t>& dims;
  int64_t origin;
};
void copy_rows(const void* src, const Rows& from, void* dst, const Rows& to, int dim,
               IndexRange rows, DType dtype) {
  std::vector<int64_t> a(from.dims.size(), 0), b(to.dims.size(), 0), count = from.dims;
  const auto d = static_cast<size_t>(dim);
  a[d] = rows.begin - from.origin;
  b[d] = rows.begin - to.origin;
  count[d] = rows.size();
  box_transfer(src, BoxAt{from.dims, a}, dst, BoxAt{to.dims, b}, count, dtype, BoxOp::copy);
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

// dist.halo_overlap auto overlaps where the boundary is at most 1/32 of a rank's output rows, so
// that the rows computed twice add at most ~3 % to the layer's arithmetic: on a 2-core machine,
// whose shared-memory exchanges take 1-15 ms, larger boundaries (CosmoFlow's conv3 to conv5 at
// 128^3 split 2 ways: 1/16 to 1/4) made the layers slower than the exchange they hid
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

}  // namespace

// One end of the block: its output rows, the window they read, the halo rows in it, the kernel
// on that window, and the layout of its transient memory (boundary window, boundary output, the
// kernel-format copies of both, the kernel's scratch, a weight gradient).
struct ConvBoundaries::Side {
  IndexRange out, window, halo;  // global rows along the moving axis
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

// Why the layer cannot overlap its exchange ("" where it can); where it can, its boundary rows
// next to the lower and the upper neighbour.
std::string why_not_overlapped(const ConvBoundaries::Layer& l, HaloOverlapMode mode,
                               IndexRange& lower, IndexRange& upper) {
  if (mode == HaloOverlapMode::off) return "not overlapped: dist.halo_overlap is off";
  if (!l.halo.moves_rows()) return "no halo";
  if (!l.halo.overlappable()) return "not overlapped: rows move along more than one axis";
  const int axis = l.halo.moving_axis();
  const WindowAxis w = window_axes(l.global)[static_cast<size_t>(axis)];
  const AxisPlan& p = l.halo.moving_plan();
  lower = reading(w, p.owned_out, p.from_lower, true);
  upper = reading(w, p.owned_out, p.from_upper, false);
  const std::string along = " along " + spatial_axis_name(l.global.spatial_rank, axis);
  if (lower.end >= upper.begin)
    return "not overlapped: no output row of " + str(p.owned_out) + along +
           " reads only this rank's rows";
  const int64_t boundary = lower.size() + upper.size();
  if (mode == HaloOverlapMode::automatic && kAutoBoundaryShare * boundary > p.owned_out.size())
    return "not overlapped: the boundary is " + std::to_string(boundary) + " of " +
           std::to_string(p.owned_out.size()) + " output rows" + along + " (more than 1/" +
           std::to_string(kAutoBoundaryShare) + "; exchange, then compute)";
  return "";
}

}  // namespace

// The kernel computing output rows `out` from their window; null where that window would need
// negative padding (a transposed convolution) or leaves out halo rows (whose gradient it then
// could not send back).
std::unique_ptr<ConvBoundaries::Side> ConvBoundaries::make_side(Backend& backend, const Layer& l,
                                                                IndexRange out, IndexRange halo) {
  const int axis = l.halo.moving_axis();
  const WindowAxis w = window_axes(l.global)[static_cast<size_t>(axis)];
  auto s = std::make_unique<Side>();
  s->out = out;
  s->window = intersect(rows_read(w, out), {0, w.in_extent});
  s->halo = halo;
  const LocalPadding pad = local_padding(w, s->window, out);
  if (pad.lo < 0 || pad.hi < 0 || !(intersect(halo, s->window) == halo)) return nullptr;
  ConvDesc d = l.local;
  const auto a = static_cast<size_t>(axis);
  d.in_size[a] = s->window.size();
  d.out_size[a] = out.size();
  d.pad_lo[a] = pad.lo;
  d.pad_hi[a] = pad.hi;
  d.bias_grad = false;  // the whole kernel computes the bias gradient once
  const std::vector<int64_t> in_rows = extents(d.in_size, d.spatial_rank);
  s->window_dims = block_dims(d.n, d.in_channels, in_rows, l.src_layout);
  s->out_dims = block_dims(d.n, d.out_channels, extents(d.out_size, d.spatial_rank), l.dst_layout);
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

std::unique_ptr<ConvBoundaries> ConvBoundaries::make(Backend& backend, const Layer& l,
                                                     HaloOverlapMode mode, std::string& why_not) {
  IndexRange lower, upper;
  why_not = why_not_overlapped(l, mode, lower, upper);
  if (!why_not.empty()) return nullptr;
  const int axis = l.halo.moving_axis();
  const AxisPlan& p = l.halo.moving_plan();
  const ConvDesc& local = l.local;
  std::unique_ptr<ConvBoundaries> b(new ConvBoundaries());
  b->dtype_ = local.dtype;
  b->window_dims_ = l.halo.window_dims();
  b->window_dim_ = l.halo.moving_dim();
  b->window_origin_ = p.window.begin;
  b->dst_dims_ = block_dims(local.n, local.out_channels,
                            extents(local.out_size, local.spatial_rank), l.dst_layout);
  b->dst_dim_ = spatial_dim(axis, l.dst_layout);
  b->dst_origin_ = p.owned_out.begin;
  b->weight_count_ = local.out_channels * local.in_channels / local.groups;
  for (int i = 0; i < local.spatial_rank; ++i) b->weight_count_ *= local.kernel[size_t(i)];
  for (auto [out, halo] : {std::pair{lower, p.from_lower}, std::pair{upper, p.from_upper}}) {
    if (out.empty()) continue;
    auto side = b->make_side(backend, l, out, halo);
    if (!side) {
      why_not =
          "not overlapped: a boundary window would need negative padding or leave out halo rows";
      return nullptr;
    }
    // A boundary window is a small, oddly padded problem: where oneDNN has only its reference
    // code for it (a transposed convolution's weight gradient on DeepCAM's 2-row boundaries
    // took 2 s against 0.1 s for the whole layer), redoing the boundary costs far more than the
    // exchange it would hide.
    if (runs_reference_code(*side->kernel)) {
      why_not = "not overlapped: a boundary kernel would run oneDNN's reference code (" +
                side->kernel->implementation() + ")";
      return nullptr;
    }
    b->scratch_bytes_ = std::max(b->scratch_bytes_, side->offset[6]);
    b->sides_.push_back(std::move(side));
  }
  b->description_ = "overlapped: the interior rows " + str({lower.end, upper.begin}) + " of " +
                    str(p.owned_out) + " along " + spatial_axis_name(local.spatial_rank, axis) +
                    " computed while the halo travels";
  return b;
}

void ConvBoundaries::forward(const void* window, const void* weights, const void* bias, void* dst,
                             void* scratch) {
  for (const auto& s : sides_) {
    const Side::Slices m = s->at(scratch);
    copy_rows(window, {window_dims_, window_origin_}, m.window, {s->window_dims, s->window.begin},
              window_dim_, s->window, dtype_);
    s->kernel->forward(s->src->to_kernel(m.window, m.src), weights, bias,
                       s->dst->kernel_buffer(m.out, m.dst), m.kernel);
    s->dst->to_plain(m.dst, m.out);
    copy_rows(m.out, {s->out_dims, s->out.begin}, dst, {dst_dims_, dst_origin_}, dst_dim_, s->out,
              dtype_);
  }
}

void ConvBoundaries::backward_halo(const void* diff_dst, const void* weights, void* window_grad,
                                   void* scratch) {
  for (const auto& s : sides_) {
    const Side::Slices m = s->at(scratch);
    copy_rows(diff_dst, {dst_dims_, dst_origin_}, m.out, {s->out_dims, s->out.begin}, dst_dim_,
              s->out, dtype_);
    s->kernel->backward_data(s->dst->to_kernel(m.out, m.dst), weights,
                             s->src->kernel_buffer(m.window, m.src), m.kernel);
    s->src->to_plain(m.src, m.window);
    copy_rows(m.window, {s->window_dims, s->window.begin}, window_grad,
              {window_dims_, window_origin_}, window_dim_, s->halo, dtype_);
  }
}

void ConvBoundaries::add_halo_weight_grad(const void* window, const void* diff_dst,
                                          void* diff_weights, void* scratch) {
  for (const auto& s : sides_) {
    const Side::Slices m = s->at(scratch);
    std::memset(m.window, 0, bytes_of(s->window_dims, dtype_));  // own rows: counted already
    copy_rows(window, {window_dims_, window_origin_}, m.window, {s->window_dims, s->window.begin},
              window_dim_, s->halo, dtype_);
    copy_rows(diff_dst, {dst_dims_, dst_origin_}, m.out, {s->out_dims, s->out.begin}, dst_dim_,
              s->out, dtype_);
    s->kernel->backward_weights(s->src->to_kernel(m.window, m.src), s->dst->to_kernel(m.out, m.dst),
                                m.dw, nullptr, m.kernel);
    add_into(diff_weights, m.dw, weight_count_, dtype_);
  }
}

}  // namespace crest
