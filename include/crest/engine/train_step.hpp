// One training step, the same for `crest train`, `crest bench train` and the tests: forward
// (the loss), backward with each gradient bucket handed to the communicator as soon as it is
// complete, the wait for the buckets, and the optimizer update. Allocates nothing.
//
// Gradient accumulation (Optimizer::accumulation() = k > 1, the DeepCAM reference's
// gradient_accumulation_frequency): run() is one micro-batch, and every k-th one ends with the
// update. The micro-batches' gradients are summed slot by slot as backward finishes them (into
// Optimizer::gradient_sum(), so checkpoints hold the partial sum); on the k-th, each slot gets
// the earlier sum added and is scaled by 1/k (the reference divides each micro-batch's loss by
// k: the same gradient) before it is handed to the allreduce, so communication still overlaps
// backward and runs once per update. Windows of k count from the first micro-batch of the run,
// across epochs, as the reference's step counter does.
//
// On a device a step waits once after backward: an update reads the loss, the sideband's
// flags and the gradients' sum of squares in one copy (read_update_facts); a micro-batch that only
// accumulates reads its loss.
//
// Dynamic loss scaling (a LossScaler, crest/optim/loss_scaler.hpp): every micro-batch's backward
// carries S·dL (Executor::set_loss_scale), so the window's sum does too; the division by S joins
// a multiply that runs anyway (the allreduce's 1/ranks, see GradientSync::set_loss_scale, or on
// one rank the window's 1/k), with a pass of its own only on one rank without accumulation. The
// overflow check is the non-finite check every update already makes on the averaged gradients
// (decide_update in train_step.cpp says why that is job-wide without a collective of its own);
// an overflow skips the update and lowers S, and is not a non-finite step.
//
// Gradient lag (Optimizer::lagged_gradient(), train.gradient_lag: 1; the Gordon Bell climate
// run's scheme): a step's gradients are not sent while backward runs. After backward they are
// copied aside and their allreduce starts, to travel during the next step's forward and backward;
// the update each step makes applies the previous step's averaged gradients (so the first step
// updates nothing), its trust ratios (LARS, LARC, LAMB) and non-finite checks included, and the
// per-step flags (stop, non-finite loss, rank failure) arrive with them, one step late. settle()
// waits for the allreduce in flight: before a checkpoint (which then holds the averaged lagged
// gradient, so a resumed run continues bit for bit) and at the run's end. With accumulation the
// lag is a window's: the window's summed gradient leaves after its last backward, and the next
// window's update applies it.
//
// Local SGD (set_local_steps(H > 1), train.local_sgd; Lin et al., ICLR 2020): a step exchanges
// nothing; each rank updates with its own gradients (skipping the update where they or its loss
// are not finite), and the step that ends a window of H updates (H x k micro-batches with
// accumulation; global steps count the micro-batches) ends with the mean of every rank's weights,
// its non-trained state (batch norm's running statistics) and its optimizer state, after which
// every rank holds the same model again. The window's flags (stop, non-finite values, rank failure)
// travel with that averaging: the result of the window's last step is the one that is `decided`.
// One rank: every step is a synchronous one. Under a spatial split (set_spatial_group) each local
// step first averages the replicated gradients over the rank's group — the group's shares of a
// split layer's gradient are its sample's only together — so a group updates as one replica.
#pragma once
#include <memory>
#include <string>

#include "crest/dist/communicator.hpp"
#include "crest/dist/gradient_sync.hpp"
#include "crest/engine/lagged_gradients.hpp"
#include "crest/graph/executor.hpp"
#include "crest/optim/loss_scaler.hpp"
#include "crest/optim/optimizer.hpp"

namespace crest {

class StepGraph;

struct StepResult {
  double loss = 0;  // the loss the forward pass computed, L2 penalties included (not / k)
  // Job-wide, decided where an optimizer step falls (`decided`): every rank gets the same values
  // from the gradient exchange's sideband (ParamStore::sideband()), at no collective of its own.
  // finite: false when a loss of the window on any rank, or the averaged gradients' norm, was
  // not finite; the update was then skipped and the weights are intact (the caller decides what
  // follows). stop_requested: some rank asked to stop (run()'s `stop_here`). rank_failed: some
  // rank failed in the window (run()'s `failed_here`, RankFailure); the update was skipped.
  bool decided = false;
  bool finite = true;
  bool stop_requested = false;
  bool rank_failed = false;
  bool nonfinite_loss = false;  // the non-finite value was (also) a loss
  bool updated = false;         // this micro-batch ended with the optimizer step
  // Loss scaling: the window's gradients overflowed at `loss_scale` (every loss finite), the
  // update was skipped and the scaler backed off; `finite` stays true (not train.on_nonfinite's).
  bool overflow = false;
  double loss_scale = 0;  // the scale this micro-batch's gradients carried; 0 without a scaler
  double forward_done = 0, backward_done = 0, gradients_done = 0,
         update_done = 0;  // Timeline::now(); gradients_done = update_done = backward_done when
                           // the micro-batch only accumulated
};

class TrainStep {
 public:
  // `sync` may be null (one process, no gradient exchange). With more than one rank the
  // executor's finished gradients go to `sync` while backward runs. `scaler`: dynamic loss
  // scaling, null for none; every rank's holds the same state, and run() keeps it so.
  TrainStep(Executor& ex, Optimizer& optimizer, GradientSync* sync, LossScaler* scaler = nullptr);
  ~TrainStep();
  TrainStep(const TrainStep&) = delete;
  TrainStep& operator=(const TrainStep&) = delete;

  // Runs one micro-batch at learning rate `lr` (used when it ends with the update) on the
  // executor's current inputs. `stop_here`: this rank asks the job to stop (a signal, its time
  // budget); the request travels with the window's gradients. `failed_here`: this rank could not
  // prepare the micro-batch (its inputs are stale); every rank learns it with the window's
  // gradients, and the update is skipped. Non-finite values skip the update and are reported in
  // the result: the caller decides.
  StepResult run(double lr, bool stop_here = false, bool failed_here = false);

  // Post-mortem after a non-finite step: the first trainable slot (in the model's order) whose
  // averaged gradient holds a non-finite value, and how many do; "" when every one is finite
  // (the loss alone was not). One pass over the gradients, never on a healthy step.
  struct NonFiniteGradients {
    std::string first;
    int count = 0;
  };
  NonFiniteGradients find_nonfinite_gradients() const;
  // The same over any parameters' gradients (a pipeline stage's).
  static NonFiniteGradients find_nonfinite_gradients(const ParamStore& params);

  // Micro-batches run so far, which places the next one in its window; a resumed run sets it to
  // the checkpoint's global step.
  int64_t micro_batches() const { return micro_batches_; }
  void set_micro_batches(int64_t n) {
    micro_batches_ = n;
    local_since_average_ = 0;  // checkpoints are taken where the models were averaged
  }
  // Whether the next run() ends with the optimizer step.
  bool next_updates() const;
  // Whether a window is open: some micro-batches summed, their update still to come.
  bool window_open() const;

  // Collective. Replaces every rank's partial gradient sum by its average over the ranks, so the
  // state is the same everywhere and rank 0's checkpoint holds it (the final allreduce then
  // averages the rest): the trainer calls it at every epoch's end while a window is open, in
  // every run, so a resumed run takes the same arithmetic as a straight one. No-op on one rank.
  void share_partial_sum(Communicator& comm);

  // Local SGD: steps per window from the next step on (1: synchronous steps). Switch only where
  // no window is open (the trainer does at an epoch's start, after end_local_window()).
  void set_local_steps(int steps);
  // The spatial group (dist.spatial) whose ranks hold shares of each sample's gradients; null:
  // none. Local SGD's steps average the replicated gradients over it (average_replicated).
  void set_spatial_group(Communicator* group) { spatial_group_ = group; }
  // Collective: averages an open window's models now, as its last step would (the trainer calls
  // it at every epoch's end, in every run, so validation and checkpoints see one model). The
  // result carries the window's flags (`decided`); nothing when no window is open. Under the
  // lag's local correction it averages the ranks' diverged models as settle() does.
  StepResult end_local_window();
  bool local_window_open() const { return local_since_average_ > 0; }

  // Gradient lag from window `window` on (train.gradient_lag's start_epoch): the windows before
  // it exchange and update synchronously; the first lagged one has nothing to apply, as a lagged
  // run's first window. Set once, before the first step; a resumed run sets the same window, so
  // it finds the phase from its micro-batch count. Default 0: lagged from the first window.
  void set_lag_start_window(int64_t window) { lag_start_window_ = window; }
  // The lag's local correction (train.gradient_lag.correction: local, LaggedGradients): each
  // rank updates with its own fresh gradient in place of its stale share of the average. Once,
  // before the first step; needs the lag.
  void correct_lag_locally();
  // Gradient lag: waits for the allreduce in flight, so the lagged gradient (optimizer state) is
  // the job's average. Collective: every rank calls it at the same point. No-op without the lag.
  // With the local correction it also averages the ranks' models and optimizer state where they
  // diverged and restarts the correction, so a checkpoint, validation and the saved weights see
  // the job's model: the trainer calls it at every epoch's end and checkpoint, in every run.
  void settle();
  // Memory the step holds besides the optimizer state: the lag's second gradient copy (and the
  // correction's).
  size_t extra_bytes() const { return lag_ ? lag_->extra_bytes() : 0; }

  // Test hook (CREST_TEST_GRAD_OVERFLOW_AT_STEP): the next micro-batch's first finished gradient
  // gets an infinity, on this rank, before it is summed or exchanged.
  void overflow_next_gradient() { overflow_next_ = true; }
  // crest.cuda_graphs: from the second step on, each step's forward and backward are recorded as
  // one graph of the backend's stream, and so is its update (after the step's one read); later
  // steps launch those graphs again, recording anew only where a host value the kernels take
  // changed (the inputs' addresses, the loss scale, the sideband's flags: StepGraph,
  // src/engine/step_graph.hpp; docs/cuda.md "Step graphs"). Needs a stream that records (the
  // cuda backend), on several ranks an exchange the device queues without the host
  // (GradientSync::why_not_recordable: NCCL, no compression, no divided parameter; it is then
  // recorded with the passes), no gradient accumulation and no gradient lag: a usage error
  // names what is in the way. Local
  // SGD steps, profiled steps and a test overflow run as they are queued; so does the update of
  // an optimizer that takes its step in one part (Optimizer::replays_update).
  void record_passes();
  // Steps whose passes, and updates whose kernels, were recorded, and those that launched a
  // recording again (0 without record_passes).
  int64_t recorded_steps() const;
  int64_t recorded_updates() const;
  int64_t replayed_steps() const;
  int64_t replayed_updates() const;

 private:
  // What a step's sideband carries: the window's flags, and whether the device raises the
  // non-finite-loss flag from this micro-batch's loss, which the host has not read yet.
  struct SidebandFlags {
    bool stop = false, nonfinite_loss = false, failed = false, flag_this_loss = false;
  };
  void on_gradient_ready(int slot);
  // Forward, the sideband, backward: recorded where record_passes() asked and the step allows.
  void run_passes(StepResult& r, bool sideband_written, bool failed_here, bool recorded);
  // The passes' kernels, after the executor's begin_forward; `forward_done` set where given.
  void queue_passes(const SidebandFlags* sideband, StepResult* forward_done);
  // What the recorded passes' kernels take from the host, as pass_graph_'s next key.
  void key_passes(const SidebandFlags* sideband);
  // The optimizer's step: recorded as the passes are.
  void update(double lr);
  bool exchanges() const { return sync_ && sync_->ranks() > 1; }
  // Whether micro-batch `n`'s window runs with the lag.
  bool lagged(int64_t n) const { return lag_ && n / accumulation_ >= lag_start_window_; }
  void unscale_where_nothing_else_does();
  // `corrected`: the gradients hold the lag's local correction (LaggedGradients).
  void decide_update(StepResult& r, double lr, bool corrected = false);
  void apply_lagged(StepResult& r, double lr, bool have_previous);
  void update_locally(StepResult& r, double lr);
  // Under local SGD and dynamic loss scaling: whether any rank's step overflowed (a collective).
  bool overflow_anywhere(StepResult& r, double norm_sq);
  void average_models(StepResult& r);
  // The mean over the ranks of the weights, the non-trained state and the optimizer's state
  // buffers other than the lagged gradient (the same on every rank).
  void average_model_and_state();

  Executor& ex_;
  Optimizer& optimizer_;
  GradientSync* sync_;
  LossScaler* scaler_;
  int accumulation_ = 1;
  int64_t micro_batches_ = 0;
  int phase_ = 0;  // this micro-batch's place in its window, while backward runs
  // This rank's facts about the open window, sent with its update's gradients.
  bool window_stop_ = false, window_nonfinite_loss_ = false, window_failed_ = false;
  bool overflow_next_ = false;
  // record_passes(); null without.
  std::unique_ptr<StepGraph> pass_graph_, update_graph_;
  bool records_now() const;
  std::unique_ptr<LaggedGradients> lag_;  // train.gradient_lag; null without
  int64_t lag_start_window_ = 0;
  // Local SGD: steps per window, steps since the last averaging, and whether this rank skipped
  // an update for a non-finite gradient in the window.
  int local_steps_ = 1;
  Communicator* spatial_group_ = nullptr;
  int64_t local_since_average_ = 0;
  bool window_nonfinite_gradient_ = false;
  // The window's flags, taken (the window's own start again from false).
  SidebandFlags take_sideband_flags(bool flag_this_loss);
  // Queues `flags` into the gradients' sideband.
  void write_sideband(const SidebandFlags& flags);
  // An update's one read after backward: the loss, the sideband's flags (into r) and the
  // gradients' sum of squares (returned), from the executor's step values at update_facts_.
  double read_update_facts(StepResult& r);
  static constexpr size_t kUpdateFacts = 4;  // three flags, the sum of squares
  size_t update_facts_ = 0;
};

}  // namespace crest
