// One training step of a pipeline stage (dist.pipeline; docs/distributed.md "Pipeline stages"):
// the stage's schedule over the batch's micro-batches (crest/engine/pipeline_stage.hpp), the
// stage's gradients averaged over its data-parallel replicas (ranks d * K + s hold replica d's
// stage s), and one optimizer update per batch on every stage — or on none.
//
// Every rank learns the step's facts in one allreduce of four numbers over the world: the loss
// (the last stage's mean over micro-batches plus every stage's L2 penalties, averaged over the
// replicas), the whole model's gradient sum of squares (each stage's, summed), and how many ranks
// asked to stop or failed. So the stages
// agree on skipping a non-finite update, and an optimizer that scales by the global gradient norm
// (LAMB) gets the whole model's, not its stage's.
//
// Gradient lag (train.gradient_lag: 1; crest/engine/lagged_gradients.hpp): the stage's gradients
// are not averaged at the schedule's end; they go aside and their allreduce over the replicas
// travels during the next step's schedule, whose update applies them (the first step updates
// nothing), as a data-parallel rank accumulating the micro-batches does. The loss's finiteness
// travels with them in the gradients' sideband, so a step's update is skipped for the loss of the
// step it applies; stop requests and rank failures act at once. With the local correction
// (train.gradient_lag.correction: local) each replica applies its own fresh gradient in place of
// its stale share of the average, updating from the first step on, and the replicas' stages are
// averaged at every epoch's end and checkpoint, as TrainStep's ranks are: 2 stages take the steps
// of one process accumulating the micro-batches under the corrected lag.
//
// Dynamic loss scaling (train.loss_scaling: dynamic; crest/optim/loss_scaler.hpp): the last
// stage seeds backward with S, every stage divides its (averaged) gradients by S before anything
// reads them, and the world's facts make every rank's scaler take the same decision: a gradient
// overflow anywhere (every loss finite, S above its minimum) skips the update on every stage and
// lowers S everywhere; under the lag the overflow is the applied gradient's.
//
// Local SGD (set_local_steps(H > 1), train.local_sgd): a step averages nothing over the replicas;
// each replica's pipeline updates with its own gradients, its stages agreeing on finiteness over
// the replica's own line of stages (skipping where its loss or gradients are not finite), and the
// step that ends a window (every H-th batch of the run, and each epoch's end) ends with the mean
// over the replicas of every stage's weights, non-trained state (batch norm's statistics) and
// optimizer state — what TrainStep does for data-parallel ranks. Stop requests and rank failures
// still act at once; a window in which some replica skipped a non-finite update ends as a
// non-finite step (`finite` false), every replica then taking the largest optimizer step count.
#pragma once
#include <memory>

#include "crest/dist/communicator.hpp"
#include "crest/dist/gradient_sync.hpp"
#include "crest/engine/lagged_gradients.hpp"
#include "crest/engine/pipeline_stage.hpp"
#include "crest/engine/training_session.hpp"
#include "crest/optim/loss_scaler.hpp"
#include "crest/optim/optimizer.hpp"

namespace crest {

struct PipelineStepResult {
  double loss = 0;              // the whole model's, every rank the same
  double grad_norm_sq = 0;      // the whole model's averaged gradient (lag: the applied one)
  bool finite = true;           // false: the update was skipped on every stage
  bool nonfinite_loss = false;  // the loss of the step whose gradients were applied
  bool updated = false;         // an update was made (not: non-finite, failed, the lag's first)
  bool overflow = false;        // loss scaling: the gradients overflowed, the update skipped
  double loss_scale = 0;        // the scale this step's gradients carried; 0 without a scaler
  bool stop_requested = false;  // some rank asked to stop (run()'s `stop_here`)
  bool rank_failed = false;     // some rank failed (run()'s `failed_here`): no update anywhere
  double compute_s = 0;         // this stage's (StageStepResult::compute_s)
  double schedule_s = 0;        // this stage's whole schedule, its waits included
};

// Who a stage's step talks to: `world`, every rank of the job (the step's facts); `replicas`, the
// ranks holding the same stage (null or one rank: no averaging); `line`, this replica's stages
// (local SGD's per-replica decisions; null: the world's facts decide); `group`, the stage's
// spatial group (local SGD's steps average its gradient shares; null: no split).
struct PipelineStepComms {
  Communicator& world;
  Communicator* replicas = nullptr;
  Communicator* line = nullptr;
  Communicator* group = nullptr;
};

struct PipelineStepOptions {
  GradientSyncOptions sync;
  bool gradient_lag = false;          // train.gradient_lag: 1
  LossScaler* scaler = nullptr;       // dynamic loss scaling; null: off
  bool lag_local_correction = false;  // train.gradient_lag.correction: local
};

class PipelineTrainStep {
 public:
  // `optimizer` is attached to the stage's parameters (with the lag's state under the lag).
  PipelineTrainStep(PipelineStage& stage, Optimizer& optimizer, PipelineStepComms comms,
                    const PipelineStepOptions& options = {});
  PipelineTrainStep(const PipelineTrainStep&) = delete;
  PipelineTrainStep& operator=(const PipelineTrainStep&) = delete;

  // `stop_here`, `failed_here`: this rank's stop request and failure (a batch it could not
  // read), which every rank learns in the step's facts.
  PipelineStepResult run(double lr, const PipelineStage::Feed& feed, bool stop_here = false,
                         bool failed_here = false);
  // Gradient lag: waits for the allreduce in flight (before a checkpoint, at the run's end);
  // with the local correction, also averages the replicas' models if they differ and restarts
  // the correction (TrainStep::settle). Collective over the replicas; no-op without the lag.
  void settle();
  // Gradient lag from step (batch) `step` on, counted from the run's start: the steps before it
  // are synchronous; the first lagged one has nothing to apply.
  void set_lag_start_step(int64_t step) { lag_start_step_ = step; }
  // Test hook (CREST_TEST_GRAD_OVERFLOW_AT_STEP): the next step's first gradient of this stage
  // gets an infinity, before it is averaged or set aside.
  void overflow_next_gradient() { overflow_next_ = true; }

  // Local SGD: updates per window from the next step on (1: synchronous steps); switch only
  // where no window is open. Refused (usage) with the lag or loss scaling, as for data-parallel
  // ranks. One replica: every step is a synchronous one.
  void set_local_steps(int steps);
  // Collective over the world: averages an open window's models now, as its last step would (at
  // every epoch's end), and settles the corrected lag. Its result carries the window's decision;
  // nothing when none is open.
  PipelineStepResult end_local_window();
  bool local_window_open() const { return local_since_average_ > 0; }

 private:
  // Loss scaling: the gradients back to the loss's scale; the test overflow written first.
  void unscale();
  // Whether this step's update goes ahead, with the scaler's decision made (every rank alike).
  bool decide(PipelineStepResult& r);
  // Lag: this step's gradients aside (its loss's finiteness in their sideband), the previous
  // step's in their place; returns whether the applied step's loss was non-finite on this rank.
  bool swap_lagged(bool have_previous, double local_loss);
  // The sum of squares of the gradients the update applies; under the corrected lag a rank whose
  // own gradient is not finite takes the average alone first (LaggedGradients::drop_correction).
  double applied_sum_squares(bool lagging);
  // Local SGD: the replica's own update (decided over its line of stages) and, at a window's end,
  // the models' mean over the replicas.
  void update_locally(PipelineStepResult& r, double lr, double local_loss);
  void average_models(PipelineStepResult& r);
  // The mean over the replicas of the stage's weights, non-trained state and optimizer state (the
  // lagged gradient, the same on every replica once settled, left alone).
  void average_model_and_state();

  PipelineStage& stage_;
  Optimizer& optimizer_;
  Communicator& world_;
  Communicator* replica_comm_ = nullptr;
  Communicator* line_ = nullptr;
  Communicator* group_ = nullptr;  // the stage's spatial group (PipelineStepComms::group)
  int replicas_ = 1;
  std::unique_ptr<GradientSync> sync_;
  std::unique_ptr<LaggedGradients> lag_;
  int64_t lag_start_step_ = 0;
  LossScaler* scaler_ = nullptr;
  bool overflow_next_ = false;
  int local_steps_ = 1;
  int local_since_average_ = 0;
  bool window_nonfinite_ = false;  // some update of this replica's open window was skipped
};

}  // namespace crest
