// A training session: a Session compiled for training plus what turns its gradients into
// updates on every rank alike — the optimizer (made through the optimizer registry), the
// data-parallel gradient exchange, synchronised batch-norm statistics, dynamic loss scaling and
// the training step. `crest train`,
// `crest bench train` and the search's trials open one, so the order these are made in (the
// optimizer's state before the weights are loaded, the weights before rank 0's are broadcast)
// is decided here once.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "crest/dist/communicator.hpp"
#include "crest/dist/gradient_sync.hpp"
#include "crest/engine/batch_norm_sync.hpp"
#include "crest/engine/session.hpp"
#include "crest/engine/train_step.hpp"
#include "crest/engine/weights.hpp"
#include "crest/optim/loss_scaler.hpp"
#include "crest/optim/optimizer.hpp"
#include "crest/optim/optimizer_config.hpp"

namespace crest {

// How gradient buckets are sized and sent (docs/distributed.md "Gradient buckets").
struct GradientSyncOptions {
  double first_bucket_mb = 1;
  double bucket_mb = 25;
  GradientCompression compression = GradientCompression::none;
  double timeout_s = 300;  // dist.timeout_s: the deadline of collectives on a device (NCCL)
};

struct TrainingSessionOptions {
  SessionOptions session;  // its purpose must be training
  OptimizerConfig optimizer;
  int accumulation = 1;  // micro-batches per optimizer step (train.gradient_accumulation_frequency)
  // train.gradient_lag: each update applies the step before's averaged gradients (TrainStep).
  bool gradient_lag = false;
  // train.gradient_lag.correction: local (TrainStep::correct_lag_locally); needs gradient_lag.
  bool lag_local_correction = false;
  GradientSyncOptions sync;
  // Batch norm's statistics are summed over this many consecutive data-parallel groups
  // (dist.batchnorm_group_size) and, under a spatial split (session.spatial), over the ranks of
  // each group: a batch norm on blocks needs its sample's sums.
  int batchnorm_group_size = 1;
  // Under a spatial split, this rank's group (HybridGroups::spatial): local SGD's steps average
  // the group's gradient shares over it (TrainStep::set_spatial_group). Null: no split.
  Communicator* spatial_group = nullptr;
  std::optional<LossScalerOptions> loss_scaling;  // unset: none
  // crest.cuda_graphs: each step's passes recorded as one graph (TrainStep::record_passes).
  bool step_graphs = false;
  // A weights file (crest/engine/weights.hpp) loaded on every rank before rank 0's parameters
  // are broadcast; "": the initialisation the seed gives.
  std::string init_weights;
  ExternalNames external_names;  // the model's external names, for init_weights
};

class TrainingSession {
 public:
  // Collective over `comm` (which must outlive the session): compiles `graph` (which must
  // outlive it too), checks that every rank has the same gradient layout and gives every rank
  // rank 0's weights. Errors name what is wrong (the layer, the file, the optimizer key).
  TrainingSession(const Graph& graph, const TrainingSessionOptions& options, Communicator& comm);
  TrainingSession(const TrainingSession&) = delete;
  TrainingSession& operator=(const TrainingSession&) = delete;

  const Session& session() const { return session_; }
  Backend& backend() const { return session_.backend(); }
  Executor& executor() const { return session_.executor(); }
  Optimizer& optimizer() const { return *optimizer_; }
  GradientSync& sync() const { return *sync_; }
  // Null where batch norm's statistics are this rank's own (one rank per group, no split).
  const GroupStatReducer* batch_norm_group() const { return bn_group_.get(); }
  LossScaler* scaler() const { return scaler_.get(); }  // null without loss scaling
  TrainStep& step() const { return *step_; }

 private:
  Session session_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<GradientSync> sync_;
  std::unique_ptr<GroupStatReducer> bn_group_;
  std::unique_ptr<LossScaler> scaler_;
  std::unique_ptr<TrainStep> step_;  // declared last: it holds the others
};

}  // namespace crest
