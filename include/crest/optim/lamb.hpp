// LAMB as apex's FusedLAMB computes it with the defaults the DeepCAM reference uses
// (reference/DEEPCAM.md "LAMB"): bias correction (step count from 1), gradient averaging,
// decoupled weight decay on every trainable tensor (adam_w mode), a global gradient-norm clip,
// and the per-tensor trust ratio only when the weight decay is not 0 (use_nvlamb off).
//
// One step, with g the (already averaged over ranks) gradients of all trainable tensors:
//   n = ||g|| over all of them; g <- g / (n / max_grad_norm) when n > max_grad_norm
//   m <- b1 m + (1 - b1) g;  v <- b2 v + (1 - b2) g^2
//   u = (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps) + wd w
//   per tensor: w <- w - lr r u, r = ||w|| / ||u|| (1 when either norm is 0, or when wd = 0)
// Every rank holds the same gradients after the allreduce, so every rank takes the same step.
// Non-trainable slots (batch-norm running statistics) lie outside the trainable range and are
// never touched.
#pragma once
#include "crest/optim/optimizer.hpp"

namespace crest {

struct LambOptions {
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-6;  // the reference's (optimizer_helpers.py), not apex's 1e-8 default
  double weight_decay = 0.01;
  double max_grad_norm = 1.0;  // > 0
};

class Lamb : public Optimizer {
 public:
  // Throws crest::Error (usage) on settings apex would not take (max_grad_norm <= 0, ...).
  explicit Lamb(const LambOptions& options);
  std::string name() const override { return "lamb"; }
  // Takes the global gradient norm (offered, else measured) and the step's divisor from it.
  void begin_step(double lr) override;
  // Not with a divided tensor: its update takes the rate and divisor from the host.
  bool replays_update() const override { return !divided_; }
  // Leaves the update direction u in the gradient buffer.
  void queue_update() override;
  // The global gradient norm the last step measured (before clipping), for logs and tests.
  double last_gradient_norm() const { return last_norm_; }

 protected:
  std::vector<std::string> state_names() const override { return {"m", "v"}; }
  void on_attach() override;

 private:
  double global_gradient_norm() const;
  void step_without_trust_ratios(const VectorOps::UpdateStep* at);
  void step_with_trust_ratios(const VectorOps::UpdateStep* at, double lr, double divisor);

  LambOptions o_;
  double last_norm_ = 0;
  double step_lr_ = 0, step_divisor_ = 1;  // begin_step's, for a divided tensor's host update
  bool divided_ = false;                   // some trainable tensor is divided over a group
  Buffer tensor_sums_;  // per slot: ||w||^2 and ||u||^2 of its last step, in the params' memory
};

}  // namespace crest
