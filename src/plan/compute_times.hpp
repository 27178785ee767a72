// How long each layer of a network takes on one rank of a machine: measured by crest bench train
// --profile where the machine's measurements hold the same layer (name and FLOPs), else its FLOPs
// at the measured or given rate (docs/scaling.md, "Compute").
#pragma once
#include <string>
#include <vector>

#include "crest/plan/machine.hpp"
#include "crest/plan/model_facts.hpp"
#include "crest/plan/scaling_model.hpp"

namespace crest {

struct LayerTime {
  double forward = 0, backward = 0;  // per sample
};

struct ComputeTimes {
  std::vector<LayerTime> layers;  // ModelFacts::layers' order
  double update_s = 0;            // the optimizer, per step
  ComputeSource source = ComputeSource::given_rate;
  // The times are a split run's blocks (crest bench train --spatial), halo exchanges included.
  bool split_measured = false;
  std::vector<std::string> notes;
};

// Where a rank computes: `threads`, the cores it computes with (a CPU node's cores over its
// ranks; may be below 1 when ranks outnumber cores), beside `node_ranks` ranks on its node.
struct RankShare {
  double threads = 1;
  int node_ranks = 1;
};

// `rank`: where the rank computes; the measurement of the nearest ranks side by side, then the
// nearest cores per rank, is used. `spatial`: the decomposition's parts per axis (empty or all
// 1: unsplit); a measurement of that very split is used where the machine has one. Throws
// crest::Error (usage) when the machine has neither a measurement nor a rate.
ComputeTimes compute_times(const ModelFacts& model, const Machine& machine, const RankShare& rank,
                           const std::vector<int>& spatial = {});

}  // namespace crest
