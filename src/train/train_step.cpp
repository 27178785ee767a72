#include "crest/train/train_step.hpp"

#include <cmath>

#include "crest/core/error.hpp"
#include "crest/dist/timeline.hpp"

namespace crest {

TrainStep::TrainStep(Executor& ex, Optimizer& optimizer, GradientSync* sync)
    : ex_(ex), optimizer_(optimizer), sync_(sync), accumulation_(optimizer.accumulation()) {
  const bool exchange = sync_ && sync_->ranks() > 1;
  if (accumulation_ > 1)
    ex_.set_gradient_ready([this](int slot) { on_gradient_ready(slot); });
  else if (exchange)
    ex_.set_gradient_ready([this](int slot) { sync_->gradient_ready(slot); });
}

bool TrainStep::next_updates() const { return (micro_batches_ + 1) % accumulation_ == 0; }

bool TrainStep::window_open() const { return micro_batches_ % accumulation_ != 0; }

// Slot by slot as backward finishes it: the first micro-batch of a window starts the sum, the
// middle ones add to it, the last one takes it back, scaled by 1/k, and goes on to the allreduce.
void TrainStep::on_gradient_ready(int slot) {
  const ParamStore& params = ex_.params();
  const ParamSlot& s = params.slots()[static_cast<size_t>(slot)];
  VectorOps& vec = ex_.vec();
  void* grad = params.grad(static_cast<size_t>(slot)).data();
  void* sum = static_cast<char*>(optimizer_.gradient_sum()) + s.offset;
  if (phase_ == 0) {
    vec.copy(grad, sum, s.count);
  } else if (phase_ + 1 < accumulation_) {
    vec.add(sum, grad, sum, s.count);
  } else {
    vec.add(grad, sum, grad, s.count);
    vec.scale(1.0 / accumulation_, grad, grad, s.count);
  }
  if (phase_ + 1 == accumulation_ && sync_ && sync_->ranks() > 1) sync_->gradient_ready(slot);
}

StepResult TrainStep::run(double lr) {
  StepResult r;
  r.loss = ex_.forward(true);
  r.forward_done = Timeline::now();
  r.finite = std::isfinite(r.loss);
  if (!r.finite) return r;
  phase_ = static_cast<int>(micro_batches_ % accumulation_);
  r.updated = phase_ + 1 == accumulation_;
  ex_.backward();
  ++micro_batches_;
  r.backward_done = Timeline::now();
  if (!r.updated) {
    r.gradients_done = r.update_done = r.backward_done;
    return r;
  }
  if (sync_) sync_->finish();
  r.gradients_done = Timeline::now();
  optimizer_.step(lr);
  r.update_done = Timeline::now();
  return r;
}

void TrainStep::share_partial_sum(Communicator& comm) {
  if (comm.size() == 1 || !window_open()) return;
  const ParamStore& params = ex_.params();
  CREST_CHECK(params.dtype() == DType::f32 && params.memory().is_host(),
              "data-parallel gradient accumulation needs float32 host memory");
  const size_t count = params.trainable_count_padded();
  comm.start_allreduce(static_cast<float*>(optimizer_.gradient_sum()), count,
                       1.0f / static_cast<float>(comm.size()), "partial gradient sum")
      ->wait();
}

}  // namespace crest
