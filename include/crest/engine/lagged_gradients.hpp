// The gradient lag's double buffer (train.gradient_lag: 1, the Gordon Bell climate run's scheme),
// shared by the data-parallel step (TrainStep) and a pipeline stage's (PipelineTrainStep): after
// backward a step's gradients go aside and their allreduce starts, to travel while the next step
// computes; the previous step's, averaged, take their place in the gradient buffer (its sideband
// included) and make the update. Two copies of the gradients per step, against an allreduce
// hidden behind a whole step.
//
// With the local correction (train.gradient_lag.correction: local; delayed gradient averaging,
// Zhu et al., NeurIPS 2021) a rank applies avg g(t-1) - g_r(t-1) + g_r(t): its own fresh gradient
// in place of its stale share of the average. The mean over the ranks of these updates is avg
// g(t), the synchronous update; each rank's model drifts from the mean by about a step times its
// gradient's difference from the average, until the ranks average their models
// (restart_correction). A third copy: this rank's previous gradient.
#pragma once
#include <optional>

#include "crest/core/tensor.hpp"
#include "crest/dist/gradient_sync.hpp"
#include "crest/graph/param_store.hpp"

namespace crest {

class LaggedGradients {
 public:
  // `lagged`: the optimizer's "lagged_gradient" state (checkpointed, laid out as the gradient
  // buffer with its sideband). `sync`: the exchange over the ranks holding these parameters;
  // null, or one rank, exchanges nothing (the lag still applies the previous step's gradients).
  LaggedGradients(const ParamStore& params, Buffer& lagged, GradientSync* sync);

  // Turns the local correction on (before the first swap).
  void correct_locally();
  bool corrects_locally() const { return own_previous_.has_value(); }

  // This step's gradients go aside and start their allreduce; with `have_previous` the last
  // step's, averaged, replace them in the gradient buffer (without, the buffer keeps this step's
  // and nothing is to be applied: the first step of a run that did not resume). With the local
  // correction every step has an update (the first: this rank's own gradient alone), and this
  // rank's gradient is multiplied by `own_scale` to the average's scale (1/S under loss scaling,
  // where the allreduce unscales) before it joins the update.
  void swap(bool have_previous, double own_scale = 1.0);
  // The local correction made this update's gradients non-finite where the average is finite:
  // this rank alone met an infinity or NaN, which the job learns from the next average. The
  // update takes the average alone (the uncorrected lag), so every rank decides alike.
  void drop_correction();
  // Whether the ranks' models may differ: a corrected update ran since the last averaging.
  bool models_diverged() const { return diverged_; }
  // At every checkpoint and epoch end, after the ranks averaged any models that diverged: the
  // next update is this rank's own gradient alone (g_r(t-1) forgotten; the ranks' mean update is
  // still the average), as after a resume from that checkpoint, which holds no per-rank state.
  void restart_correction();
  // Waits for the allreduce in flight, so the lagged gradient (optimizer state) is the average
  // over the ranks. Collective: every rank calls it at the same point. No-op when none is.
  void settle();
  // Memory held besides the optimizer state: the second gradient copy (and the correction's).
  size_t extra_bytes() const {
    return spare_.bytes() + (own_previous_ ? own_previous_->bytes() : 0);
  }

 private:
  // Before lagged_ and spare_ change places: this step's gradients (in the gradient buffer) go
  // to spare_ and the previous step's average (lagged_) takes their place...
  void swap_plain(bool have_previous);
  // ... or, with the local correction, grads = own_scale * own - (own_previous - average) in the
  // trainable part, and own_previous takes own_scale * own.
  void swap_correcting(bool have_previous, double own_scale);

  const ParamStore& params_;
  Buffer& lagged_;
  GradientSync* sync_;
  Buffer spare_;  // this step's gradients are copied here; it then becomes the lagged one
  bool in_flight_ = false;
  std::optional<Buffer> own_previous_;  // the local correction's g_r(t-1), trainable part
  bool have_own_previous_ = false;      // false: take the average's place (restart_correction)
  bool diverged_ = false;
};

}  // namespace crest
