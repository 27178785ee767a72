// The gradient lag's double buffer (train.gradient_lag: 1, the Gordon Bell climate run's scheme),
// shared by the data-parallel step (TrainStep) and a pipeline stage's (PipelineTrainStep): after
// backward a step's gradients go aside and their allreduce starts, to travel while the next step
// computes; the previous step's, averaged, take their place in the gradient buffer (its sideband
// included) and make the update. Two copies of the gradients per step, against an allreduce
// hidden behind a whole step.
#pragma once
#include "crest/core/tensor.hpp"
#include "crest/dist/gradient_sync.hpp"
#include "crest/graph/param_store.hpp"

namespace crest {

class LaggedGradients {
 public:
  // `lagged`: the optimizer's "lagged_gradient" state (checkpointed, laid out as the gradient
  // buffer with its sideband). `sync`: the exchange over the ranks holding these parameters;
  // null, or one rank, exchanges nothing (the lag still applies the previous step's gradients).
  LaggedGradients(const ParamStore& params, Buffer& lagged, GradientSync* sync);

  // This step's gradients go aside and start their allreduce; with `have_previous` the last
  // step's, averaged, replace them in the gradient buffer (without, the buffer keeps this step's
  // and nothing is to be applied: the first step of a run that did not resume).
  void swap(bool have_previous);
  // Waits for the allreduce in flight, so the lagged gradient (optimizer state) is the average
  // over the ranks. Collective: every rank calls it at the same point. No-op when none is.
  void settle();
  // Memory held besides the optimizer state: the second gradient copy.
  size_t extra_bytes() const { return spare_.bytes(); }

 private:
  const ParamStore& params_;
  Buffer& lagged_;
  GradientSync* sync_;
  Buffer spare_;  // this step's gradients are copied here; it then becomes the lagged one
  bool in_flight_ = false;
};

}  // namespace crest
