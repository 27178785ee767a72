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
                                const std::string& key, HaloOverlapMode overlap, int stages) {
  HybridGroups g;
  for (int p : parts) {
    if (p < 1) throw_usage(key + ": " + parts_text(parts) + ": every part must be >= 1");
    g.ranks_per_sample *= p;
  }
  const int per_replica = g.ranks_per_sample * stages;
  // (Stages alone are the pipeline's to check: dist.pipeline.stages.)
  if (g.ranks_per_sample > 1 && world.size() % per_replica != 0)
    throw_usage(key + ": " + parts_text(parts) + " splits each sample among " +
                std::to_string(g.ranks_per_sample) + " ranks" +
                (stages > 1 ? " in each of " + std::to_string(stages) +
                                  " pipeline stages (dist.pipeline.stages): " +
                                  std::to_string(per_replica) + " ranks per replica,"
                            : ",") +
                " which does not divide the job's " + std::to_string(world.size()) + " ranks");
  g.data_parallel = world.size() / per_replica;
  if (g.ranks_per_sample == 1) return g;
  const int group = world.rank() / g.ranks_per_sample;  // replica d's stage s: d * stages + s
  const int place = world.rank() % g.ranks_per_sample;
  // Every split is collective over the world, in the same order on every rank.
  g.spatial = world.split(group, place);
  g.data = world.split(place, group);
  Communicator* replicas = g.data.get();
  if (stages > 1) {
    const int stage = group % stages, replica = group / stages;
    g.stage_data = world.split(stage * g.ranks_per_sample + place, replica);
    replicas = g.stage_data.get();
  }
  g.split = make_spatial_split(*g.spatial, SpatialGrid{parts}, overlap, replicas);
  return g;
}

}  // namespace crest
