// Block splits, the group's grid, and the halo plan of one axis (decomposition.hpp).
#include "crest/spatial/decomposition.hpp"

#include <algorithm>

#include "crest/core/error.hpp"

namespace crest {

IndexRange intersect(IndexRange a, IndexRange b) {
  return {std::max(a.begin, b.begin), std::max(std::max(a.begin, b.begin), std::min(a.end, b.end))};
}

std::string str(IndexRange r) {
  return "[" + std::to_string(r.begin) + ", " + std::to_string(r.end) + ")";
}

IndexRange block_range(int64_t extent, int parts, int index) {
  CREST_CHECK(parts > 0 && index >= 0 && index < parts, "block_range: index outside the parts");
  const int64_t base = extent / parts, extra = extent % parts;
  const int64_t begin = index * base + std::min<int64_t>(index, extra);
  return {begin, begin + base + (index < extra ? 1 : 0)};
}

int SpatialGrid::size() const {
  int n = 1;
  for (int p : parts) n *= p;
  return n;
}

std::vector<int> SpatialGrid::coords(int group_rank) const {
  std::vector<int> c(parts.size());
  for (size_t a = parts.size(); a-- > 0;) {
    c[a] = group_rank % parts[a];
    group_rank /= parts[a];
  }
  return c;
}

int SpatialGrid::rank_of(const std::vector<int>& coords) const {
  int r = 0;
  for (size_t a = 0; a < parts.size(); ++a) r = r * parts[a] + coords[a];
  return r;
}

int SpatialGrid::neighbour(int group_rank, int axis, int step) const {
  std::vector<int> c = coords(group_rank);
  c[static_cast<size_t>(axis)] += step;
  return rank_of(c);
}

namespace {

// Division rounding towards minus infinity (rows below 0 are padding).
int64_t floor_div(int64_t a, int64_t b) { return a / b - (a % b != 0 && (a < 0) != (b < 0)); }

}  // namespace

IndexRange rows_read(const WindowAxis& w, IndexRange out) {
  const int64_t span = (w.kernel - 1) * w.dilation;
  if (w.transposed)  // the input rows i with i * stride - pad_lo + j * dilation in `out`
    return {floor_div(out.begin + w.pad_lo - span + w.stride - 1, w.stride),
            floor_div(out.end - 1 + w.pad_lo, w.stride) + 1};
  return {out.begin * w.stride - w.pad_lo, (out.end - 1) * w.stride - w.pad_lo + span + 1};
}

LocalPadding local_padding(const WindowAxis& w, IndexRange window, IndexRange out) {
  if (!w.transposed) {
    const IndexRange read = rows_read(w, out);
    return {window.begin - read.begin, read.end - window.end};
  }
  // Local input row i - window.begin writes local output rows (i - window.begin) * stride - lo
  // + j * dilation, which must be the global rows minus out.begin; hi follows from out's size.
  const int64_t lo = w.pad_lo + out.begin - window.begin * w.stride;
  const int64_t hi =
      (window.size() - 1) * w.stride - lo + (w.kernel - 1) * w.dilation + 1 - out.size();
  return {lo, hi};
}

namespace {

// The input rows part `index` reads, clipped to the real rows.
IndexRange window_of(const WindowAxis& w, int parts, int index) {
  return intersect(rows_read(w, block_range(w.out_extent, parts, index)), {0, w.in_extent});
}

std::string where(const std::string& key, const std::string& layer, const std::string& axis,
                  const WindowAxis& w, int parts) {
  return key + ": layer '" + layer + "' split " + std::to_string(parts) + " ways along " + axis +
         " (input extent " + std::to_string(w.in_extent) + ", output extent " +
         std::to_string(w.out_extent) + ", kernel " + std::to_string(w.kernel) + ", stride " +
         std::to_string(w.stride) + ", dilation " + std::to_string(w.dilation) + ")";
}

}  // namespace

std::string split_problem(const WindowAxis& w, int parts) {
  if (w.out_extent < parts || w.in_extent < parts)
    return "fewer rows than parts; some rank would hold nothing";
  for (int i = 0; i < parts; ++i) {
    const IndexRange need = window_of(w, parts, i);
    const LocalPadding pad = local_padding(w, need, block_range(w.out_extent, parts, i));
    if (w.transposed && parts > 1 && (pad.lo < 0 || pad.hi < 0))
      return "part " + std::to_string(i) +
             "'s transposed convolution would need negative padding (a stride above the "
             "kernel's span); it runs on the gathered tensor";
    const IndexRange reach{block_range(w.in_extent, parts, std::max(i - 1, 0)).begin,
                           block_range(w.in_extent, parts, std::min(i + 1, parts - 1)).end};
    if (need.empty()) return "part " + std::to_string(i) + " would read only padding";
    if (need.begin < reach.begin || need.end > reach.end)
      return "part " + std::to_string(i) + " reads input rows " + str(need) +
             " but it and its neighbours hold only " + str(reach) +
             "; the halo is wider than a neighbour's part (use fewer parts on this axis)";
  }
  return "";
}

AxisPlan plan_axis(const WindowAxis& w, int parts, int index, const std::string& layer,
                   const std::string& axis, const std::string& key) {
  if (const std::string problem = split_problem(w, parts); !problem.empty())
    throw_usage(where(key, layer, axis, w, parts) + ": " + problem);
  AxisPlan p;
  p.parts = parts;
  p.index = index;
  p.owned_in = block_range(w.in_extent, parts, index);
  p.owned_out = block_range(w.out_extent, parts, index);
  p.window = intersect(rows_read(w, p.owned_out), {0, w.in_extent});
  const LocalPadding pad = local_padding(w, p.window, p.owned_out);
  p.pad_lo = pad.lo;
  p.pad_hi = pad.hi;
  if (index > 0) {
    p.from_lower = intersect(p.window, block_range(w.in_extent, parts, index - 1));
    p.to_lower = intersect(p.owned_in, window_of(w, parts, index - 1));
  }
  if (index + 1 < parts) {
    p.from_upper = intersect(p.window, block_range(w.in_extent, parts, index + 1));
    p.to_upper = intersect(p.owned_in, window_of(w, parts, index + 1));
  }
  return p;
}

std::vector<std::vector<IndexRange>> blocks_of(const SpatialGrid& grid, const Shape& global) {
  std::vector<std::vector<IndexRange>> blocks;
  for (int r = 0; r < grid.size(); ++r) {
    const std::vector<int> c = grid.coords(r);
    std::vector<IndexRange> b;
    for (size_t a = 0; a < grid.parts.size(); ++a)
      b.push_back(block_range(global[static_cast<int>(a) + 2], grid.parts[a], c[a]));
    blocks.push_back(std::move(b));
  }
  return blocks;
}

}  // namespace crest
