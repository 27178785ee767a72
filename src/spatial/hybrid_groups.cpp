#include "crest/spatial/hybrid_groups.hpp"

#include "crest/core/error.hpp"
#include "crest/spatial/spatial_program.hpp"

namespace crest {
namespace {

std::string parts_text(const std::vector<int>& parts) {
  std::string s = "[";
  for (size_t i = 0; i < parts.size(); ++i) s += (i ? ", " : "") + std::to_string(parts[i]);
  return s + "]";
}

}  // namespace

HybridGroups make_hybrid_groups(Communicator& world, const std::vector<int>& parts,
                                const std::string& key, HaloOverlapMode overlap) {
  HybridGroups g;
  for (int p : parts) {
    if (p < 1) throw_usage(key + ": " + parts_text(parts) + ": every part must be >= 1");
    g.ranks_per_sample *= p;
  }
  if (world.size() % g.ranks_per_sample != 0)
    throw_usage(key + ": " + parts_text(parts) + " splits each sample among " +
                std::to_string(g.ranks_per_sample) + " ranks, which does not divide the job's " +
                std::to_string(world.size()) + " ranks");
  g.data_parallel = world.size() / g.ranks_per_sample;
  if (g.ranks_per_sample == 1) return g;
  const int group = world.rank() / g.ranks_per_sample;
  const int place = world.rank() % g.ranks_per_sample;
  // Both splits are collective over the world, in the same order on every rank.
  g.spatial = world.split(group, place);
  g.data = world.split(place, group);
  g.split = make_spatial_split(*g.spatial, SpatialGrid{parts}, overlap, g.data.get());
  return g;
}

}  // namespace crest
