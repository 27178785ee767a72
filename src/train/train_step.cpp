#include "crest/train/train_step.hpp"

#include <cmath>

#include "crest/dist/timeline.hpp"

namespace crest {

TrainStep::TrainStep(Executor& ex, Optimizer& optimizer, GradientSync* sync)
    : ex_(ex), optimizer_(optimizer), sync_(sync) {
  if (sync_ && sync_->ranks() > 1)
    ex_.set_gradient_ready([this](int slot) { sync_->gradient_ready(slot); });
}

StepResult TrainStep::run(double lr) {
  StepResult r;
  r.loss = ex_.forward(true);
  r.forward_done = Timeline::now();
  r.finite = std::isfinite(r.loss);
  if (!r.finite) return r;
  ex_.backward();
  r.backward_done = Timeline::now();
  if (sync_) sync_->finish();
  r.gradients_done = Timeline::now();
  optimizer_.step(lr);
  r.update_done = Timeline::now();
  return r;
}

}  // namespace crest
