// The ranks of a job whose samples are split spatially (dist.spatial), combined with data
// parallelism: groups of consecutive ranks each hold one sample (the spatial group, whose ranks
// form the decomposition's grid), and the ranks at the same place in every group see the
// data-parallel shard of the samples. Weights stay replicated and their gradients are averaged
// over all ranks (the split convolutions scale their share by the group's size), so the gradient
// sync, batch norm groups and job control keep using the world.
//
// Under pipeline stages (dist.pipeline with K stages) every stage of a replica's pipeline is a
// spatial group of its own: rank (d * K + s) * S + p is place p of stage s of replica d (S ranks
// per sample), so a group's ranks are consecutive and the same place of the next stage is S
// ranks on (crest/engine/pipeline_training_session.hpp).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "crest/dist/communicator.hpp"
#include "crest/graph/spatial_split.hpp"
#include "crest/spatial/halo_overlap.hpp"

namespace crest {

struct HybridGroups {
  int ranks_per_sample = 1;  // the product of the parts
  int data_parallel = 1;     // the world's size divided by ranks_per_sample (and the stages)
  // Null without a split (ranks_per_sample 1): then the world is both.
  std::unique_ptr<Communicator> spatial;  // this rank's group, which holds one sample
  std::unique_ptr<Communicator> data;     // one rank per group, this rank's place in each
  // Under pipeline stages: the ranks at this rank's place in its stage's groups, one per replica.
  // They shard the samples, and the dense head's weight parts are averaged over them. Null
  // without stages (then `data` is they).
  std::unique_ptr<Communicator> stage_data;
  std::shared_ptr<SpatialSplit> split;  // for the compiler (CompileOptions::spatial)

  // The communicator whose rank and size shard the samples, and over which figures that count
  // samples (losses, metrics, throughput) are summed: each sample once.
  Communicator& data_comm(Communicator& world) const { return data ? *data : world; }
};

// Splits `world` for `parts` ranks per spatial axis (`overlap`: dist.halo_overlap) in each of
// `stages` pipeline stages. Refuses (exit 2, naming `key`, "dist.spatial" or "--spatial") parts
// below 1 and a product (times the stages) that does not divide the world's size. Collective:
// every rank calls it with the same parts.
HybridGroups make_hybrid_groups(Communicator& world, const std::vector<int>& parts,
                                const std::string& key,
                                HaloOverlapMode overlap = HaloOverlapMode::automatic,
                                int stages = 1);

}  // namespace crest
