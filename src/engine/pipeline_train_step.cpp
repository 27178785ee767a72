#include "crest/engine/pipeline_train_step.hpp"

#include <cmath>

namespace crest {

PipelineTrainStep::PipelineTrainStep(PipelineStage& stage, Optimizer& optimizer,
                                     Communicator& world, Communicator* replicas,
                                     const GradientSyncOptions& sync_options)
    : stage_(stage), optimizer_(optimizer), world_(world) {
  Executor& ex = stage.executor();
  optimizer.attach(ex.params(), ex.vec());
  if (replicas && replicas->size() > 1) {
    replicas_ = replicas->size();
    sync_ = std::make_unique<GradientSync>(*replicas, ex.params(), ex.gradient_ready_order(),
                                           sync_options.first_bucket_mb, sync_options.bucket_mb,
                                           sync_options.compression);
    sync_->verify_same_layout_everywhere();
    sync_->broadcast_parameters(ex.params());  // replica 0's stage, everywhere
  }
}

PipelineStepResult PipelineTrainStep::run(double lr, const PipelineStage::Feed& feed,
                                          bool stop_here, bool failed_here) {
  const double start = steady_seconds();
  const StageStepResult s = stage_.run(feed);
  const double schedule_s = steady_seconds() - start;
  Executor& ex = stage_.executor();
  if (sync_) {  // the stage's gradients are final once the schedule ends: every bucket at once
    for (int slot : ex.gradient_ready_order()) sync_->gradient_ready(slot);
    sync_->finish();
  }
  // Summed over the world, each stage counted once per replica.
  double facts[4] = {s.data_loss + s.penalty, ex.params().grad_sum_squares(), stop_here ? 1.0 : 0.0,
                     failed_here ? 1.0 : 0.0};
  world_.allreduce_sum(facts, 4);
  PipelineStepResult r;
  r.loss = facts[0] / replicas_;
  r.grad_norm_sq = facts[1] / replicas_;
  r.stop_requested = facts[2] > 0;
  r.rank_failed = facts[3] > 0;
  r.compute_s = s.compute_s;
  r.schedule_s = schedule_s;
  r.finite = std::isfinite(r.loss) && std::isfinite(r.grad_norm_sq);
  if (!r.finite || r.rank_failed) return r;
  // This stage's part of the norm is what an optimizer scaling by the global norm must not use.
  optimizer_.offer_gradient_sum_squares(r.grad_norm_sq);
  optimizer_.step(lr);
  return r;
}

}  // namespace crest
