#include "crest/optim/lr_policy.hpp"

namespace crest {
namespace {

class EpochLrPolicy final : public LrPolicy {
 public:
  EpochLrPolicy(const LrSchedule& s, int64_t global_batch) : s_(s), global_batch_(global_batch) {
    (void)s_.lr(0, global_batch_);  // validates the settings and the batch now, not mid-run
  }
  double lr(int64_t /*optimizer_step*/, int epoch) const override {
    return s_.lr(epoch, global_batch_);
  }
  bool per_step() const override { return false; }

 private:
  LrSchedule s_;
  int64_t global_batch_;
};

class StepLrPolicy final : public LrPolicy {
 public:
  explicit StepLrPolicy(const StepLrSchedule& s) : s_(s) { s_.validate(); }
  double lr(int64_t optimizer_step, int /*epoch*/) const override { return s_.lr(optimizer_step); }
  bool per_step() const override { return true; }

 private:
  StepLrSchedule s_;
};

}  // namespace

std::unique_ptr<LrPolicy> make_epoch_lr_policy(const LrSchedule& schedule, int64_t global_batch) {
  return std::make_unique<EpochLrPolicy>(schedule, global_batch);
}

std::unique_ptr<LrPolicy> make_step_lr_policy(const StepLrSchedule& schedule) {
  return std::make_unique<StepLrPolicy>(schedule);
}

}  // namespace crest
