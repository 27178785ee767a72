#include "crest/engine/training_session.hpp"

#include "crest/core/error.hpp"
#include "crest/optim/optimizer_registry.hpp"
#include "gradient_sync_setup.hpp"
#include "training_state_copies.hpp"

namespace crest {

namespace {

std::unique_ptr<Optimizer> attached_optimizer(const TrainingSessionOptions& o, Executor& ex) {
  std::unique_ptr<Optimizer> optimizer = make_optimizer(o.optimizer);
  optimizer->attach(ex.params(), ex.vec(), o.accumulation, o.gradient_lag);
  return optimizer;
}

// The session's options with what training keeps beside the program counted against the memory
// limit (training_state_copies).
SessionOptions training_options(const TrainingSessionOptions& o) {
  CREST_CHECK(o.session.purpose == Purpose::training, "a training session needs Purpose::training");
  SessionOptions so = o.session;
  so.beside.trainable_copies =
      training_state_copies(o.optimizer, o.accumulation, o.gradient_lag, o.lag_local_correction);
  return so;
}

}  // namespace

// The order matters to the bits of a run: the optimizer's state is made (and zeroed) before any
// weights are loaded, and every rank loads the file before rank 0's values are broadcast.
TrainingSession::TrainingSession(const Graph& graph, const TrainingSessionOptions& o,
                                 Communicator& comm)
    : session_(graph, training_options(o)), optimizer_(attached_optimizer(o, session_.executor())) {
  Executor& ex = session_.executor();
  if (!o.init_weights.empty()) load_weights(ex.params(), o.init_weights, o.external_names);
  sync_ = make_gradient_sync(comm, ex, o.sync);
  const int ranks_per_sample = o.session.spatial ? o.session.spatial->group_size() : 1;
  bn_group_ = make_batch_norm_group(comm, o.batchnorm_group_size, ranks_per_sample);
  ex.set_batch_stat_reducer(bn_group_.get());
  if (o.loss_scaling) scaler_ = std::make_unique<LossScaler>(*o.loss_scaling);
  step_ = std::make_unique<TrainStep>(ex, *optimizer_, sync_.get(), scaler_.get());
  if (o.lag_local_correction) step_->correct_lag_locally();
  if (o.step_graphs) step_->record_passes();
  step_->set_spatial_group(o.spatial_group);
}

}  // namespace crest
