#include "crest/engine/pipeline_train_step.hpp"

#include <cmath>
#include <limits>
#include <utility>

#include "crest/core/error.hpp"
#include "crest/core/host_staging.hpp"
#include "gradient_sync_setup.hpp"

namespace crest {

PipelineTrainStep::PipelineTrainStep(PipelineStage& stage, Optimizer& optimizer,
                                     PipelineStepComms comms, const PipelineStepOptions& options)
    : stage_(stage),
      optimizer_(optimizer),
      world_(comms.world),
      replica_comm_(comms.replicas),
      line_(comms.line),
      group_(comms.group),
      scaler_(options.scaler) {
  Executor& ex = stage.executor();
  optimizer.attach(ex.params(), ex.vec(), 1, options.gradient_lag);
  if (comms.replicas && comms.replicas->size() > 1) {
    replicas_ = comms.replicas->size();
    sync_ = make_gradient_sync(*comms.replicas, ex, options.sync);  // replica 0's stage, everywhere
  }
  if (Buffer* lagged = optimizer.lagged_gradient())
    lag_ = std::make_unique<LaggedGradients>(ex.params(), *lagged, sync_.get());
  if (lag_ && options.lag_local_correction) lag_->correct_locally();
}

namespace {

// The sideband's first value, in the gradients' dtype: 1 where the loss was not finite (averaged
// over the replicas with the gradients, so above zero means "on some replica").
void write_loss_flag(const ParamStore& params, bool nonfinite) {
  HostStaging host(params.memory(), params.sideband(), dtype_size(params.dtype()),
                   /*fetch=*/false);
  if (params.dtype() == DType::f64)
    host.as<double>()[0] = nonfinite ? 1 : 0;
  else
    host.as<float>()[0] = nonfinite ? 1.f : 0.f;
  host.commit();
}

bool read_loss_flag(const ParamStore& params) {
  const HostStaging host(params.memory(), static_cast<const void*>(params.sideband()),
                         dtype_size(params.dtype()));
  return params.dtype() == DType::f64 ? host.as<double>()[0] > 0 : host.as<float>()[0] > 0;
}

}  // namespace

void PipelineTrainStep::unscale() {
  const ParamStore& params = stage_.executor().params();
  if (std::exchange(overflow_next_, false)) {
    CREST_CHECK(params.dtype() == DType::f32, "a test gradient overflow needs float32");
    const int slot = stage_.executor().gradient_ready_order().front();
    HostStaging host(params.memory(), params.grad(static_cast<size_t>(slot)).data(), sizeof(float));
    host.as<float>()[0] = std::numeric_limits<float>::infinity();
    host.commit();
  }
  if (scaler_)
    params.ops().scale(1.0 / scaler_->scale(), params.grads(), params.grads(),
                       params.trainable_count_padded());
}

bool PipelineTrainStep::swap_lagged(bool have_previous, double local_loss) {
  const ParamStore& params = stage_.executor().params();
  write_loss_flag(params, !std::isfinite(local_loss));
  // The correction's own gradient is the stage's whole samples': a spatial group's shares of it
  // are averaged first, synchronously (TrainStep's rule).
  if (lag_->corrects_locally() && group_)
    average_replicated(*group_, params, params.grads(), params.trainable_bytes());
  lag_->swap(have_previous);
  return have_previous && read_loss_flag(params);
}

// The sum of squares of the gradients the update applies. The lag's local correction holds this
// replica's own fresh gradient, which no other replica sees: where it is not finite, this rank
// takes the average alone (TrainStep::decide_update's rule), and the next average carries the bad
// values to every replica.
double PipelineTrainStep::applied_sum_squares(bool lagging) {
  const ParamStore& params = stage_.executor().params();
  const double sum = params.grad_sum_squares();
  if (!lagging || !lag_->corrects_locally() || std::isfinite(sum)) return sum;
  lag_->drop_correction();
  return params.grad_sum_squares();
}

PipelineStepResult PipelineTrainStep::run(double lr, const PipelineStage::Feed& feed,
                                          bool stop_here, bool failed_here) {
  Executor& ex = stage_.executor();
  // Steps before, in this run or resumed (the executor counts micro-batches): whether this one
  // lags, and has a lagged one to apply.
  const auto taken = static_cast<int64_t>(ex.training_steps()) / stage_.micro_batches();
  const bool lagging = lag_ && taken >= lag_start_step_;
  const bool have_previous = taken > lag_start_step_;
  PipelineStepResult r;
  if (scaler_) {
    r.loss_scale = scaler_->scale();
    stage_.set_loss_scale(r.loss_scale);
  }
  const double start = steady_seconds();
  const StageStepResult s = stage_.run(feed);
  r.schedule_s = steady_seconds() - start;
  r.compute_s = s.compute_s;
  const double local_loss = s.data_loss + s.penalty;
  unscale();  // before the average too: each replica's S is the same, so the order is free
  bool applied_loss_nonfinite = false;
  if (lagging) {
    applied_loss_nonfinite = swap_lagged(have_previous, local_loss);
  } else if (sync_ && local_steps_ == 1) {
    // The stage's gradients are final once the schedule ends: every bucket at once.
    for (int slot : ex.gradient_ready_order()) sync_->gradient_ready(slot);
    sync_->finish();
  }
  // Summed over the world, each stage counted once per replica.
  double facts[5] = {local_loss, applied_sum_squares(lagging), stop_here ? 1.0 : 0.0,
                     failed_here ? 1.0 : 0.0, applied_loss_nonfinite ? 1.0 : 0.0};
  world_.allreduce_sum(facts, 5);
  r.loss = facts[0] / replicas_;
  r.grad_norm_sq = facts[1] / replicas_;
  r.stop_requested = facts[2] > 0;
  r.rank_failed = facts[3] > 0;
  r.nonfinite_loss = lagging ? facts[4] > 0 : !std::isfinite(r.loss);
  if (local_steps_ > 1) {  // the window's end decides; its flags are not a loss's
    r.nonfinite_loss = false;
    update_locally(r, lr, local_loss);
    return r;
  }
  if (lagging && !have_previous && !lag_->corrects_locally()) return r;  // nothing to apply yet
  if (!decide(r)) return r;
  // This stage's part of the norm is what an optimizer scaling by the global norm must not use.
  optimizer_.offer_gradient_sum_squares(r.grad_norm_sq);
  optimizer_.step(lr);
  r.updated = true;
  return r;
}

// TrainStep::decide_update's rule on the world's facts: a non-finite loss, or a non-finite
// gradient that scaling cannot cure, is train.on_nonfinite's; an overflow S can back off from is
// skipped and lowers S.
bool PipelineTrainStep::decide(PipelineStepResult& r) {
  if (r.rank_failed) return false;  // the run ends: nothing to decide
  const bool gradients_finite = std::isfinite(r.grad_norm_sq);
  if (scaler_ && scaler_->skips_overflow(!r.nonfinite_loss, gradients_finite)) {
    r.overflow = true;
    return false;
  }
  r.finite = !r.nonfinite_loss && gradients_finite;
  return r.finite;
}

void PipelineTrainStep::set_local_steps(int steps) {
  CREST_CHECK(steps >= 1 && !local_window_open(), "local SGD windows change between windows");
  if (steps > 1 && lag_) throw_usage("train.local_sgd with train.gradient_lag is not supported");
  CREST_CHECK(steps == 1 || line_ != nullptr, "local SGD needs the replica's line of stages");
  local_steps_ = replicas_ > 1 ? steps : 1;
}

// This replica's own update: its stages agree on the finiteness of its loss and gradients. Under
// dynamic loss scaling every scaler decides on the world's facts the step already summed (r.loss,
// r.grad_norm_sq), as TrainStep's local steps do: an overflow anywhere skips the step everywhere.
void PipelineTrainStep::update_locally(PipelineStepResult& r, double lr, double local_loss) {
  const ParamStore& params = stage_.executor().params();
  if (group_) average_replicated(*group_, params, params.grads(), params.trainable_bytes());
  double mine[2] = {local_loss, params.grad_sum_squares()};
  line_->allreduce_sum(mine, 2);
  r.overflow =
      scaler_ && scaler_->skips_overflow(std::isfinite(r.loss), std::isfinite(r.grad_norm_sq));
  if (!r.rank_failed && !r.overflow) {  // a failed rank's inputs are stale: the job ends there
    if (std::isfinite(mine[0]) && std::isfinite(mine[1])) {
      optimizer_.offer_gradient_sum_squares(mine[1]);
      optimizer_.step(lr);
      r.updated = true;
    } else {
      window_nonfinite_ = true;
    }
  }
  ++local_since_average_;
  // Windows fall on multiples of H batches of the whole run (the step counter counts
  // micro-batches), as TrainStep's do: an epoch's end that averaged early moves no later window.
  const uint64_t batches =
      stage_.executor().training_steps() / static_cast<uint64_t>(stage_.micro_batches());
  if (batches % static_cast<uint64_t>(local_steps_) == 0) average_models(r);
}

// The mean over the replicas of the stage's model and optimizer state; a window where some
// replica skipped an update ends non-finite, every replica taking the largest step count (Adam's
// and LAMB's bias correction).
void PipelineTrainStep::average_models(PipelineStepResult& r) {
  average_model_and_state();
  double skipped = window_nonfinite_ ? 1.0 : 0.0;
  world_.allreduce_sum(&skipped, 1);
  r.finite = skipped == 0;
  if (!r.finite)
    optimizer_.set_steps_taken(
        static_cast<int64_t>(world_.allreduce_max(static_cast<double>(optimizer_.steps_taken()))));
  window_nonfinite_ = false;
  local_since_average_ = 0;
}

void PipelineTrainStep::average_model_and_state() {
  const ParamStore& params = stage_.executor().params();
  average_store_layout(*replica_comm_, params, params.values(), params.bytes());
  for (const auto& state : optimizer_.state())
    if (state.second != optimizer_.lagged_gradient())
      average_store_layout(*replica_comm_, params, state.second->data(), params.trainable_bytes());
}

PipelineStepResult PipelineTrainStep::end_local_window() {
  PipelineStepResult r;
  if (local_window_open()) average_models(r);
  if (lag_ && lag_->corrects_locally()) settle();  // the corrected lag's models, likewise
  return r;
}

void PipelineTrainStep::settle() {
  if (!lag_) return;
  lag_->settle();
  if (!lag_->corrects_locally()) return;
  if (lag_->models_diverged()) average_model_and_state();
  lag_->restart_correction();
}

}  // namespace crest
