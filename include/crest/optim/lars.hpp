// LARS (You, Gitman, Ginsburg 2017) in the form of timm's `Lars` (timm/optim/lars.py, after
// PyTorch's SGD and NVIDIA apex's LARC) with always_adapt=True, trust_clip=False, dampening 0 and
// no Nesterov: SGD with momentum in torch's form, on a gradient scaled per tensor by its trust
// ratio. One step, for every adapted (not excluded) trainable tensor w with gradient g:
//   r   = eta ||w|| / (||g|| + wd ||w|| + eps), or 1 when ||w|| or ||g|| is 0
//   d   = r (g + wd w)
//   buf = momentum buf + d          (buf starts at 0, so the first step makes it d, as torch's
//                                    clone of the first gradient does)
//   w   = w - lr buf
// and for an excluded tensor (crest/optim/layer_adaptation.hpp: the biases and batch-norm scales
// and shifts by default) the same with r = 1 and wd = 0: timm's usual second parameter group
// (weight_decay 0, which with always_adapt off is not adapted either).
//
// With momentum_form = keras, the MLPerf ResNet-50 TF2 reference's LARSOptimizer
// (image_classification/tensorflow2/lars_optimizer.py, as the paper and NVIDIA's TF LARS): the
// rate and ratio go inside the momentum, so a changing rate (warmup, decay) scales only the new
// gradient, not the accumulated velocity:
//   v   = momentum v - lr r (g + wd w)     (v starts at 0; state "momentum", as TF's slot)
//   w   = w + v
// The two forms agree while lr is constant (v = -lr buf). The TF reference's epsilon is Keras'
// `epsilon or backend epsilon`: its 0.0 becomes 1e-7, so trust_eps 1e-7 reproduces it.
//
// Other LARS implementations differ again: torchlars and apex's LARC wrap another optimizer
// (crest/optim/larc.hpp), timm's default adapts only when wd != 0. The norms are of the averaged
// gradient (after the allreduce and gradient accumulation), so every rank takes the same step.
#pragma once
#include "crest/optim/layer_adaptation.hpp"
#include "crest/optim/optimizer.hpp"

namespace crest {

// Where the learning rate sits: outside the momentum (torch's SGD, timm's Lars) or inside it
// (Keras' SGD, the TF reference's LARSOptimizer).
enum class LarsMomentumForm { torch, keras };

struct LarsOptions {
  double momentum = 0;               // timm's (and crest's optimizer.momentum) default
  double trust_coefficient = 0.001;  // eta: timm's and the paper's default
  double eps = 1e-8;                 // timm's
  double weight_decay = 0;
  LarsExclusions exclude = {};
  LarsMomentumForm momentum_form = LarsMomentumForm::torch;
};

class Lars : public Optimizer {
 public:
  // Throws crest::Error (usage) on settings that make no sense (eta <= 0, momentum >= 1, ...).
  explicit Lars(LarsOptions options);
  std::string name() const override { return "lars"; }
  bool replays_update() const override { return true; }
  void queue_update() override;
  std::string notes() const override;
  const AdaptedTensors& tensors() const { return tensors_; }
  // The trust ratio each adapted tensor got in the last step (tensors().adapted() order), from
  // its norms read back (a copy on a device).
  std::vector<double> last_trust_ratios() const;

 protected:
  // Named by form, so a checkpoint of one form cannot silently resume in the other (the
  // velocities differ by the sign and the rate).
  std::vector<std::string> state_names() const override {
    return {o_.momentum_form == LarsMomentumForm::keras ? "momentum" : "momentum_buffer"};
  }
  void on_attach() override;

 private:
  void update(size_t slot, const VectorOps::UpdateStep* at, const VectorOps::TrustRatioAt* ratio);

  LarsOptions o_;
  AdaptedTensors tensors_;
};

}  // namespace crest
