// What the training loop asks for its learning rate: the rate of the next optimizer step, given
// how many optimizer steps were taken (0-based: the index of the step about to run) and the epoch
// in progress (0-based). Both schedule families answer it: CosmoFlow's per-epoch LrSchedule
// (which ignores the step) and DeepCAM's per-step StepLrSchedule (which ignores the epoch).
#pragma once
#include <cstdint>
#include <memory>

#include "crest/optim/lr_schedule.hpp"
#include "crest/optim/step_lr_schedule.hpp"

namespace crest {

class LrPolicy {
 public:
  virtual ~LrPolicy() = default;
  virtual double lr(int64_t optimizer_step, int epoch) const = 0;
  // True for a rate that changes within an epoch (the per-step family).
  virtual bool per_step() const = 0;
};

// The per-epoch schedule at a fixed global batch (its scaling needs it). Validates.
std::unique_ptr<LrPolicy> make_epoch_lr_policy(const LrSchedule& schedule, int64_t global_batch);
// The per-step schedule. Validates.
std::unique_ptr<LrPolicy> make_step_lr_policy(const StepLrSchedule& schedule);

}  // namespace crest
