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

IndexRange rows_read(const WindowAxis& w, IndexRange out) {
  return {out.begin * w.stride - w.pad_lo,
          (out.end - 1) * w.stride - w.pad_lo + (w.kernel - 1) * w.dilation + 1};
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

// Every part must own input and output rows, and read only its own and its neighbours' rows.
void check_split(const WindowAxis& w, int parts, const std::string& context) {
  if (w.out_extent < parts || w.in_extent < parts)
    throw_usage(context + ": fewer rows than parts; some rank would hold nothing");
  for (int i = 0; i < parts; ++i) {
    const IndexRange need = window_of(w, parts, i);
    const IndexRange reach{block_range(w.in_extent, parts, std::max(i - 1, 0)).begin,
                           block_range(w.in_extent, parts, std::min(i + 1, parts - 1)).end};
    if (need.empty())
      throw_usage(context + ": part " + std::to_string(i) + " would read only padding");
    if (need.begin < reach.begin || need.end > reach.end)
      throw_usage(context + ": part " + std::to_string(i) + " reads input rows " + str(need) +
                  " but it and its neighbours hold only " + str(reach) +
                  "; the halo is wider than a neighbour's part (use fewer parts on this axis)");
  }
}

}  // namespace

AxisPlan plan_axis(const WindowAxis& w, int parts, int index, const std::string& layer,
                   const std::string& axis, const std::string& key) {
  check_split(w, parts, where(key, layer, axis, w, parts));
  AxisPlan p;
  p.parts = parts;
  p.index = index;
  p.owned_in = block_range(w.in_extent, parts, index);
  p.owned_out = block_range(w.out_extent, parts, index);
  const IndexRange read = rows_read(w, p.owned_out);
  p.window = intersect(read, {0, w.in_extent});
  p.pad_lo = p.window.begin - read.begin;
  p.pad_hi = read.end - p.window.end;
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

}  // namespace crest
