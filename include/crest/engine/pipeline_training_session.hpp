// A pipeline's training session (dist.pipeline; docs/distributed.md "Pipeline stages"): the
// model cut into K stages, this rank's stage compiled at the micro-batch size, its optimizer, and
// the step that runs the schedule and averages the stage's gradients over its replicas. `crest
// train` and `crest bench pipeline` open one, so where ranks sit and how the model is cut are
// decided here once.
//
// Ranks d * K + s hold replica d's stage s: a replica's stages are consecutive ranks (on one node
// where the node has K ranks or more, so activations travel over the fastest link). Under a
// spatial split of S ranks per sample (o.session.spatial, made by make_hybrid_groups with the
// stages), each stage is a spatial group: ranks (d * K + s) * S + p, p the place in the group.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "crest/dist/communicator.hpp"
#include "crest/dist/pipeline_schedule.hpp"
#include "crest/engine/batch_norm_sync.hpp"
#include "crest/engine/pipeline_stage.hpp"
#include "crest/engine/pipeline_train_step.hpp"
#include "crest/engine/saved_state.hpp"
#include "crest/engine/session.hpp"
#include "crest/engine/training_session.hpp"
#include "crest/graph/pipeline_cut.hpp"
#include "crest/models/built_model.hpp"
#include "crest/optim/optimizer.hpp"

namespace crest {

struct PipelineRanks {
  int stages = 1, replicas = 1, stage = 0, replica = 0;
  int group_size = 1, place = 0;  // a spatial split's ranks per sample, and this rank's place
  bool last_stage() const { return stage + 1 == stages; }
};

// Where this rank sits; refuses (exit 2, naming `key`) a stage count that does not divide the
// world's size (with `group_size` ranks per stage of a replica).
PipelineRanks pipeline_ranks(const Communicator& world, int stages, const std::string& key,
                             int group_size = 1);

// Per node of `graph`, in order: its cost in `by_name` (0 where it has none).
std::vector<double> per_node_costs(const Graph& graph,
                                   const std::map<std::string, double>& by_name);

// Per node of `graph`, in order: the FLOPs of a training step in `plan` (the whole model compiled,
// allocated or not) — forward, and the backward where the node runs one.
std::vector<double> node_training_flops(const Graph& graph, const Executor& plan);

// Per node of `m.graph`, in order: the measured seconds of a forward and backward at `so`'s batch
// (the micro-batch; random inputs, the mean of three steps after a warm-up) plus adding its
// parameters' gradients into the batch's sum, which a stage does after every micro-batch — a
// layer with many parameters and few FLOPs costs its stage more than its FLOPs say. Compiles and
// runs the whole model on this rank (unsplit: `so.spatial` is ignored).
std::vector<double> measured_node_costs(const BuiltModel& m, SessionOptions so);

// Each stage's compute time from every rank's own (`mine`, this rank's stage's): the mean over
// the stage's ranks, every stage's on every rank. Collective over `world`.
std::vector<double> stage_compute_means(const PipelineRanks& at, double mine, Communicator& world);

// The costs a re-cut balances: `costs` (per node) rescaled by the stages' measured compute times
// `stage_s` (costs_scaled_to_stages, over the cut balanced_stage_starts makes of `costs`); empty
// where the cut would not move, or `costs` is empty (nothing measured to move it by).
std::vector<double> rebalanced_costs(const std::vector<double>& costs, int stages,
                                     const std::vector<double>& stage_s);

// The first layer of each stage after the first: `given` (checked to name stages - 1 layers), or
// where `costs` (per node, node_training_flops or measured) balance (balanced_stage_starts).
std::vector<std::string> pipeline_stage_starts(const std::vector<std::string>& given,
                                               const Graph& graph, const std::vector<double>& costs,
                                               int stages, const std::string& key);

struct PipelineOptions {
  int stages = 1, micro_batches = 1;
  PipelineScheduleKind schedule = PipelineScheduleKind::one_forward_one_backward;
  bool recompute = false;
  std::vector<std::string> stage_starts;  // empty: where the stages' FLOPs balance
  std::vector<double> costs;              // per node, to balance instead of FLOPs (measured)
  // Named in errors.
  std::string stages_key = "dist.pipeline.stages", stage_starts_key = "dist.pipeline.stage_starts";
};

class PipelineTrainingSession;

// The whole model's state of a pipeline (PipelineTrainingSession::saved_state): replica 0's
// stages serve rank 0 their tensors one by one as it writes them.
class PipelineSavedState final : public SavedState {
 public:
  PipelineSavedState(PipelineTrainingSession& session, Communicator& world)
      : p_(session), world_(world) {}
  const ParamStore& layout() const override;
  std::vector<std::string> optimizer_states() const override;
  std::string optimizer_name() const override;
  uint64_t executor_steps() const override;
  int64_t optimizer_steps() const override;
  void provide(bool with_optimizer,
               const std::function<void(const checkpoint_file::StateBytes&)>& write) override;
  void load(const SafetensorsFile* file);  // PipelineTrainingSession::load_state

 private:
  void release_servers();

  PipelineTrainingSession& p_;
  Communicator& world_;
};

class PipelineTrainingSession {
 public:
  // Collective over `world`. `o.session.batch` is the micro-batch; what a pipeline does not run
  // with (gradient accumulation) is refused naming `p.stages_key`. A spatial split
  // (o.session.spatial) must come from make_hybrid_groups with p.stages. Synchronised
  // batch norm groups consecutive replicas of each stage (synchronise_batch_norm). Initial
  // weights (`o.init_weights`) are a whole model's file, as one process reads it.
  PipelineTrainingSession(const Graph& graph, const TrainingSessionOptions& o,
                          const PipelineOptions& p, Communicator& world);
  PipelineTrainingSession(const PipelineTrainingSession&) = delete;
  PipelineTrainingSession& operator=(const PipelineTrainingSession&) = delete;

  // The whole model, compiled but not allocated: the backend, and the model's plan and FLOPs.
  // Its parameters are a layout (ParamStore::allocated() false), so a rank holds its stage's
  // parameters alone.
  const Session& whole() const { return whole_; }
  Backend& backend() const { return whole_.backend(); }
  const PipelineRanks& ranks() const { return ranks_; }
  const std::vector<PipelineStageGraph>& graphs() const { return graphs_; }
  const PipelineStageGraph& stage_graph() const {
    return graphs_[static_cast<size_t>(ranks_.stage)];
  }
  PipelineStage& stage() const { return *stage_; }
  Executor& executor() const { return stage_->executor(); }  // the stage's parameters
  Optimizer& optimizer() const { return *optimizer_; }
  // The ranks holding this stage (rank: the replica, and the place in its spatial group) and the
  // ranks of this replica's pipeline at this rank's place (rank: the stage).
  Communicator& replicas() const { return *replicas_; }
  Communicator& pipeline() const { return *pipeline_; }
  PipelineTrainStep& step() const { return *step_; }
  // Dynamic loss scaling (o.loss_scaling): every rank's scaler, alike; null without.
  LossScaler* scaler() const { return scaler_.get(); }

  // Checkpoints and weight files hold the whole model, as one process writes it (so a run
  // resumes under any stage count, or none), and no rank holds it: rank 0 writes each tensor as
  // the stage holding it sends it (PipelineSavedState).
  SavedState& saved_state() const { return *saved_; }
  // Collective over the world: every stage of every replica takes its parameters and optimizer
  // state from `file` (a checkpoint rank 0 has verified against the whole model; null on the
  // other ranks), which rank 0 sends each rank tensor by tensor.
  void load_state(const SafetensorsFile* file) { saved_->load(file); }

 private:
  void synchronise_batch_norm(int group_size);

  Session whole_;
  PipelineRanks ranks_;
  std::vector<PipelineStageGraph> graphs_;
  std::unique_ptr<Communicator> replicas_, pipeline_;
  std::unique_ptr<GroupStatReducer> bn_group_;  // null without dist.batchnorm_group_size
  std::unique_ptr<PipelineStage> stage_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<PipelineSavedState> saved_;
  std::unique_ptr<LossScaler> scaler_;
  std::unique_ptr<PipelineTrainStep> step_;  // declared last: it holds the others
};

// Each stage's least compute time over `batches` training batches of random inputs, after one
// untimed (every stage's on every rank; collective over `world`): what a re-cut balances. The
// batches update `s`'s weights: probe a session made for it, not the one that trains.
std::vector<double> probe_stage_compute(PipelineTrainingSession& s, const BuiltModel& m,
                                        int batches, Communicator& world);

}  // namespace crest
