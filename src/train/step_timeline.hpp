// A training step on the run's Chrome-trace timeline (dist.timeline): its phases on the compute
// row and each gradient bucket's queueing and allreduce on the communication row.
#pragma once
#include <cstdint>

#include "crest/dist/gradient_sync.hpp"
#include "crest/dist/timeline.hpp"
#include "crest/engine/train_step.hpp"

namespace crest {

// `data_start`/`data_done`: when the step asked the loader for its batch and got it. `exchange`:
// the step's gradient exchange, whose buckets are drawn; null for a pipeline stage's step (one
// span).
void record_step(Timeline& timeline, const GradientSync* exchange, int64_t step_in_epoch,
                 double data_start, double data_done, const StepResult& r);

}  // namespace crest
