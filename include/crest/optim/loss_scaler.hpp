// Dynamic loss scaling (train.loss_scaling: dynamic), with the rule of torch.amp.GradScaler and
// Apex's DynamicLossScaler: the loss's gradient is multiplied by a scale S, so backward carries
// S·dL and small gradients stay representable in 16-bit floats; the gradients are divided by S
// again before the optimizer sees them. An optimizer step whose gradients overflowed (an infinity
// or NaN anywhere) is skipped and S is multiplied by backoff_factor; after growth_interval
// consecutive clean steps S is multiplied by growth_factor.
//
// This class is the rule and its state only (what a checkpoint keeps); TrainStep
// (crest/engine/train_step.hpp) applies S and 1/S and finds the overflow.
//
// Two bounds, from Apex: S never grows beyond kMaxScale (Apex's max_loss_scale default, 2^24),
// and never backs off below kMinScale = 1. An overflow at S = 1 is not one that scaling causes or
// can cure: the gradients are non-finite as the loss gives them, so the caller treats the step as
// a non-finite step (train.on_nonfinite) instead of skipping on silently (torch would halve S
// towards 0 and skip every step from then on).
#pragma once
#include <cstdint>
#include <string>

namespace crest {

struct LossScalerOptions {
  double initial_scale = 65536;  // 2^16, torch's and Apex's
  int64_t growth_interval = 2000;
  double growth_factor = 2;     // > 1
  double backoff_factor = 0.5;  // in (0, 1)
};

// What a checkpoint keeps, so a resumed run scales exactly as an uninterrupted one.
struct LossScalerState {
  double scale = 0;
  int64_t clean_steps = 0;  // consecutive steps without overflow since S last changed
};

class LossScaler {
 public:
  static constexpr double kMinScale = 1;
  static constexpr double kMaxScale = 16777216;  // 2^24

  // Throws crest::Error (usage) on options outside the documented ranges.
  explicit LossScaler(const LossScalerOptions& options);

  double scale() const { return state_.scale; }
  const LossScalerState& state() const { return state_; }
  void restore(const LossScalerState& state) { state_ = state; }
  void reset() { state_ = {options_.initial_scale, 0}; }  // as constructed

  // Whether an overflow at the current scale is one to skip and back off from: false at
  // kMinScale (see the file comment).
  bool can_back_off() const { return state_.scale > kMinScale; }
  // After an optimizer step's overflow check. An overflow needs can_back_off().
  void update(bool overflow);
  // The rule every step's decision follows, on the job's facts (every rank alike): an overflow
  // the scale can back off from (every loss finite, some gradient not) backs off and returns
  // true: the update is skipped. A clean step (all finite) counts toward growth. Anything else (a
  // non-finite loss, which forward never owes to S; an overflow at kMinScale) leaves the scale
  // alone: it is train.on_nonfinite's.
  bool skips_overflow(bool losses_finite, bool gradients_finite);

 private:
  LossScalerOptions options_;
  LossScalerState state_;
};

// A scale as logs print it: "65536", "0.75" (whole numbers in full, others to 6 digits).
std::string loss_scale_text(double scale);

}  // namespace crest
