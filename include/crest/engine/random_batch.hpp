// A model's inputs filled with seeded random values, for what times a model without data: the
// benches, and the measured per-layer costs a pipeline's cut balances.
#pragma once
#include <string>
#include <vector>

#include "crest/backends/kernels.hpp"
#include "crest/graph/executor.hpp"
#include "crest/models/built_model.hpp"

namespace crest {

// Random inputs like the peer scripts' (CosmoFlow's ln(1 + counts) and DeepCAM's normalised
// fields are O(1)), written on the host and copied into the model's memory. Integer targets are
// class labels with the classes' rough frequencies (mostly background). `only`: just these of the
// two inputs (a pipeline stage has one or none); empty: both.
void fill_random_batch(Executor& ex, const BuiltModel& m, Backend& backend,
                       const std::vector<std::string>& only = {});

}  // namespace crest
