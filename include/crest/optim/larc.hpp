// LARC with the semantics of NVIDIA apex's `apex.parallel.LARC`: a wrapper that owns a base
// optimizer (Keras-form SGD, Adam, AdamW) and rescales each tensor's gradient before the base
// optimizer's step, so that tensor's effective learning rate follows the trust ratio. One step,
// for every adapted (not excluded) trainable tensor w with gradient g whose norms are both
// nonzero:
//   a = eta ||w|| / (||g|| + wd ||w|| + eps)
//   clip mode:  a = min(a / lr, 1)      (the tensor's rate becomes min(lr, eta ||w|| / ...))
//   scale mode: a as it is              (the tensor's rate becomes a lr)
//   g = a (g + wd w)                    (two passes, as apex's `+=` and `*=`, rounding between)
// then base.step(lr) over every tensor. A tensor with a zero norm, and an excluded tensor
// (crest/optim/layer_adaptation.hpp), keeps its gradient as it is and gets no weight decay (apex
// skips both when a norm is 0). The weight decay is LARC's: apex takes the base's weight_decay
// and sets the base's to 0 for the step, so the base optimizer given here must have weight decay
// 0. With the decay absorbed, an AdamW base takes the same steps as an Adam base.
//
// The gradient buffer holds the rescaled gradient afterwards, as apex leaves p.grad. The norms
// are of the averaged gradient (after the allreduce and gradient accumulation), so every rank
// takes the same step. The state is the base optimizer's (its names in checkpoints), plus the
// gradient sum under accumulation.
#pragma once
#include <memory>

#include "crest/optim/layer_adaptation.hpp"
#include "crest/optim/optimizer.hpp"

namespace crest {

enum class LarcMode { clip, scale };

struct LarcOptions {
  LarcMode mode = LarcMode::clip;   // apex's default (clip=True)
  double trust_coefficient = 0.02;  // eta: apex's default
  double eps = 1e-8;                // apex's
  double weight_decay = 0;          // taken over from the base optimizer
  LarsExclusions exclude = {};
};

class Larc : public Optimizer {
 public:
  // Throws crest::Error (usage) on impossible settings (eta <= 0, ...) or a missing base.
  Larc(std::unique_ptr<Optimizer> base, LarcOptions options);
  // "larc(<base>)": a checkpoint resumes only with the same base optimizer (its state).
  std::string name() const override { return "larc(" + base_->name() + ")"; }
  // Its own step's values, then the base's.
  void begin_step(double lr) override;
  bool replays_update() const override { return base_->replays_update(); }
  // The rescaling, then the base's update (its step() where the base takes one part only).
  void queue_update() override;
  std::string notes() const override;
  std::vector<std::pair<std::string, Buffer*>> state() override;
  int state_buffers(int accumulation, bool gradient_lag) const override {
    return base_->state_buffers(1, false) + Optimizer::state_buffers(accumulation, gradient_lag);
  }
  void set_steps_taken(int64_t steps) override;
  const Optimizer& base() const { return *base_; }
  const AdaptedTensors& tensors() const { return tensors_; }
  // The factor each adapted tensor's gradient got in the last step (tensors().adapted() order;
  // 1 where a norm was 0), from its norms read back (a copy on a device).
  std::vector<double> last_factors() const;

 protected:
  // Its own state is only the gradient sum; the base optimizer holds the rest.
  std::vector<std::string> state_names() const override { return {}; }
  void on_attach() override;

 private:
  std::unique_ptr<Optimizer> base_;
  LarcOptions o_;
  AdaptedTensors tensors_;
  double last_lr_ = 0;  // the last step's, for last_factors's clip
};

}  // namespace crest
