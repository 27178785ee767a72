// One training step, the same for `crest train`, `crest bench train` and the tests: forward
// (the loss), backward with each gradient bucket handed to the communicator as soon as it is
// complete, the wait for the buckets, and the optimizer update. Allocates nothing.
#pragma once
#include "crest/dist/gradient_sync.hpp"
#include "crest/graph/executor.hpp"
#include "crest/optim/optimizer.hpp"

namespace crest {

struct StepResult {
  double loss = 0;     // the loss the forward pass computed, L2 penalties included
  bool finite = true;  // false: backward and the update were skipped (the weights are intact)
  double forward_done = 0, backward_done = 0, gradients_done = 0,
         update_done = 0;  // Timeline::now()
};

class TrainStep {
 public:
  // `sync` may be null (one process, no gradient exchange). With more than one rank the
  // executor's finished gradients go to `sync` while backward runs.
  TrainStep(Executor& ex, Optimizer& optimizer, GradientSync* sync);
  TrainStep(const TrainStep&) = delete;
  TrainStep& operator=(const TrainStep&) = delete;

  // Runs one step at learning rate `lr` on the executor's current inputs. A non-finite loss
  // skips backward and the update and is reported in the result: the caller decides.
  StepResult run(double lr);

 private:
  Executor& ex_;
  Optimizer& optimizer_;
  GradientSync* sync_;
};

}  // namespace crest
