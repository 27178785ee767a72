// Optimizers update the flat parameter buffer from the flat gradient buffer in one call (the
// element-wise kernels live in the backend's VectorOps). Their state is flat buffers of the same
// layout, so checkpoints and sharded optimizers see slices.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "crest/backends/kernels.hpp"
#include "crest/core/staged_values.hpp"
#include "crest/graph/param_store.hpp"
#include "crest/optim/layer_adaptation.hpp"

namespace crest {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual std::string name() const = 0;
  // Allocates zeroed state for `params`; must be called before step(). With `accumulation` > 1
  // the state also holds the sum of the micro-batches' gradients between two steps
  // ("gradient_sum", see gradient_sum()): it is state like the moments, so a checkpoint taken
  // between two updates resumes exactly (optax.MultiSteps keeps it in the optimizer state too).
  // With `gradient_lag` it also holds the averaged gradient of the last step, which the next
  // update applies ("lagged_gradient", see lagged_gradient()), with the gradient buffer's
  // sideband. Ends with on_attach(), where an optimizer derives what it needs from the
  // parameters.
  void attach(ParamStore& params, VectorOps& vec, int accumulation = 1, bool gradient_lag = false);
  // One update with learning rate `lr` from the current gradients. It may consume them: LAMB
  // leaves its update direction in the gradient buffer, as apex does. The built-in optimizers
  // take it in two parts, begin_step(lr) then queue_update(); an optimizer of one's own may
  // override step() alone (docs/extending.md).
  virtual void step(double lr);
  // Whether step() is begin_step() then queue_update(), the second queuing the same kernels with
  // the same arguments every step (their rate and step count read at update_step()): a
  // recorded update may then be launched again instead of recorded (crest.cuda_graphs).
  virtual bool replays_update() const { return false; }
  // The host's side of a step: counts it and writes its values where the update's kernels read
  // them (stage_update: queued, so outside any recording of queue_update). LAMB takes the
  // global gradient norm here.
  virtual void begin_step(double lr);
  // The update's kernels, changing no host state. Only where replays_update().
  virtual void queue_update();
  // The sum of squares of the whole trainable gradient range (its zero padding included), when
  // the caller has just measured it: TrainStep does, for its finiteness check. An optimizer that
  // needs the global gradient norm (LAMB) takes it from here instead of reading every gradient
  // again. It holds for the next step() only.
  void offer_gradient_sum_squares(double sum_squares) { offered_sum_squares_ = sum_squares; }
  // State buffers by name ("velocity", "m", "v", then "gradient_sum", "lagged_gradient"), for
  // checkpoints. Virtual
  // for wrappers (LARC), whose state is their base optimizer's.
  virtual std::vector<std::pair<std::string, Buffer*>> state();
  // How many buffers the size of the trainable parameters attach(accumulation, gradient_lag)
  // allocates, before it is attached (the memory check counts them before compiling).
  virtual int state_buffers(int accumulation, bool gradient_lag) const {
    return static_cast<int>(state_names().size()) + (accumulation > 1 ? 1 : 0) +
           (gradient_lag ? 1 : 0);
  }
  int64_t steps_taken() const { return steps_; }
  // Restores the step count from a checkpoint (Adam's bias correction depends on it); a wrapper
  // passes it on to its base optimizer.
  virtual void set_steps_taken(int64_t steps) { steps_ = steps; }
  // A line for `crest train --dry-run` on what the optimizer made of the parameters (LARS: the
  // tensors it leaves alone), or "".
  virtual std::string notes() const { return {}; }
  // Micro-batches whose gradients make one update (train.gradient_accumulation_frequency).
  int accumulation() const { return accumulation_; }
  // Where the micro-batches' gradients are summed (the gradient buffer's layout); null when
  // accumulation() is 1.
  void* gradient_sum();
  // train.gradient_lag: the last step's gradient (laid out as the gradient buffer, its sideband
  // included), which TrainStep averages and the next update applies; null without the lag.
  Buffer* lagged_gradient();

 protected:
  virtual std::vector<std::string> state_names() const = 0;
  // Called at the end of attach(), params_ and vec_ set: per-tensor bookkeeping (LARS's
  // exclusions), a wrapper's base optimizer. May throw crest::Error (usage).
  virtual void on_attach() {}
  // The offered sum of squares, once; nullopt when none was offered since the last step.
  std::optional<double> take_offered_sum_squares() {
    return std::exchange(offered_sum_squares_, std::nullopt);
  }
  // Writes this step's rate, steps_ and LAMB's gradient divisor where the update kernels read
  // them (VectorOps::UpdateStep) and returns that address, the same every step. The step must
  // be counted (1-based) and the divisor positive: the kernels cannot refuse what they read.
  const VectorOps::UpdateStep* stage_update(double lr, double grad_divisor = 1.0);
  // Where stage_update wrote the values (valid after attach()).
  const VectorOps::UpdateStep* update_step() const { return update_step_.get(); }
  ParamStore* params_ = nullptr;
  VectorOps* vec_ = nullptr;
  std::vector<Buffer> state_;  // state_names() in order, the gradient sum, the lagged gradient
  size_t count_ = 0;           // trainable elements incl. alignment padding (which stays zero)
  int64_t steps_ = 0;
  int accumulation_ = 1;
  bool gradient_lag_ = false;

 private:
  std::optional<double> offered_sum_squares_;
  StagedValues<VectorOps::UpdateStep> update_step_;
};

// SGD with momentum in the Keras form the CosmoFlow reference uses: v = m v - lr g; w = w + v.
// (torch.optim.SGD scales differently when lr changes between steps.) Weight decay is torch's L2
// form, g + wd w, on every tensor but the excluded ones (crest/optim/layer_adaptation.hpp: by
// default the biases and batch-norm parameters, as MLPerf's ResNet-50 recipe leaves them).
// With Nesterov (Keras's form, w = w + m v - lr g) the weights are the heavy-ball weights plus
// the next momentum step: the gradient is taken where the weights are headed, which also widens
// the stable step of a one-step gradient lag (docs/convergence.md).
class SgdKeras : public Optimizer {
 public:
  explicit SgdKeras(double momentum, double weight_decay = 0, LarsExclusions exclude = {},
                    bool nesterov = false);
  std::string name() const override { return "sgd"; }
  bool replays_update() const override { return true; }
  void queue_update() override;
  // The tensors that get weight decay (slot indices); empty without it.
  const std::vector<size_t>& decayed() const { return decayed_; }

 protected:
  std::vector<std::string> state_names() const override { return {"velocity"}; }
  void on_attach() override;

 private:
  double momentum_, weight_decay_;
  LarsExclusions exclude_;
  bool nesterov_;
  std::vector<size_t> decayed_;
};

// Adam (L2 added to the gradient: torch.optim.Adam's weight_decay) and AdamW (decoupled weight
// decay: torch.optim.AdamW) with bias correction; eps is added to sqrt(v̂), as torch does.
class Adam : public Optimizer {
 public:
  Adam(double beta1, double beta2, double eps, double weight_decay, bool decoupled)
      : beta1_(beta1), beta2_(beta2), eps_(eps), wd_(weight_decay), decoupled_(decoupled) {}
  std::string name() const override { return decoupled_ ? "adamw" : "adam"; }
  bool replays_update() const override { return true; }
  void queue_update() override;

 protected:
  std::vector<std::string> state_names() const override { return {"m", "v"}; }

 private:
  double beta1_, beta2_, eps_, wd_;
  bool decoupled_;
};

}  // namespace crest
