// Population-based training's explore step (docs/search.md "PBT"): a copied trial's
// hyperparameters, perturbed.
#pragma once
#include <cstdint>

#include "crest/search/search_space.hpp"

namespace crest {

struct PbtSettings {
  int interval = 1;        // epochs between a member's decisions (T)
  double quantile = 0.25;  // bottom and top fractions of the population
  double resample = 0.25;  // a list parameter's probability of a fresh draw
};

// `params` (a donor's) perturbed: each range parameter multiplied by 0.8 or 1.2 (integers
// rounded, values kept inside the range), each list parameter drawn afresh with probability
// `resample`, else kept. A list parameter that a `when:` depends on is kept, so the set of active
// parameters never changes. A pure function of (seed, counter).
Assignment perturb(const SearchSpace& space, const Assignment& params, const PbtSettings& settings,
                   uint64_t seed, uint64_t counter);

// Keys whose change PBT cannot carry over a copied checkpoint: the model (the weights' shapes
// and meaning) and optimizer.name (the state's layout). "" when none, else the first such key.
std::string pbt_refused_key(const SearchSpace& space);

}  // namespace crest
