#include "crest/engine/pipeline_training_session.hpp"

#include <map>

#include "crest/core/error.hpp"
#include "crest/engine/batch_norm_sync.hpp"
#include "crest/engine/weights.hpp"
#include "crest/optim/optimizer_registry.hpp"
#include "training_state_copies.hpp"

namespace crest {

namespace {

// What a pipeline's stages do not run with yet, named by their options.
void refuse_unsupported(const TrainingSessionOptions& o, const PipelineOptions& p) {
  const std::string with = p.stages_key + " " + std::to_string(p.stages) + " with ";
  if (o.accumulation > 1) throw_usage(with + "gradient accumulation is not supported yet");
  if (o.step_graphs) throw_usage(with + "crest.cuda_graphs is not supported yet");
}

// The whole model's plan, its parameters a layout alone: no rank holds the whole model, so no
// rank's memory limit applies to it (each stage's compile checks its own part). It is never
// split: its parameters are the whole tensors a checkpoint holds.
SessionOptions plan_only(SessionOptions so) {
  so.allocate = false;
  so.allocate_params = false;
  so.param_gradients = false;
  so.spatial = nullptr;
  so.memory_limit = 0;
  so.memory_limit_set = true;  // nor the backend's own memory (Backend::memory_capacity)
  so.beside = {};
  so.stages_batches = false;
  return so;
}

// A stage's compile options: its optimizer's state counted with it (the stage adds its own
// buffers: PipelineStage).
CompileOptions stage_compile_options(const TrainingSessionOptions& o, const Backend& backend) {
  CompileOptions co = compile_options(o.session, backend);
  co.beside.trainable_copies =
      training_state_copies(o.optimizer, 1, o.gradient_lag, o.lag_local_correction);
  return co;
}

int group_size_of(const SessionOptions& so) { return so.spatial ? so.spatial->group_size() : 1; }

}  // namespace

PipelineRanks pipeline_ranks(const Communicator& world, int stages, const std::string& key,
                             int group_size) {
  const int per_replica = stages * group_size;
  if (stages < 1 || world.size() % per_replica != 0)
    throw_usage(key + " " + std::to_string(stages) + " does not divide the " +
                std::to_string(world.size()) + " ranks (ranks = stages x data-parallel replicas" +
                (group_size > 1 ? " x " + std::to_string(group_size) + " ranks per sample" : "") +
                ")");
  const int group = world.rank() / group_size;
  return {.stages = stages,
          .replicas = world.size() / per_replica,
          .stage = group % stages,
          .replica = group / stages,
          .group_size = group_size,
          .place = world.rank() % group_size};
}

std::vector<std::string> pipeline_stage_starts(const std::vector<std::string>& given,
                                               const Graph& graph, const std::vector<double>& costs,
                                               int stages, const std::string& key) {
  if (!given.empty()) {
    if (static_cast<int>(given.size()) != stages - 1)
      throw_usage(key + " names " + std::to_string(given.size()) + " layers for " +
                  std::to_string(stages) + " stages (one per stage after the first)");
    return given;
  }
  std::vector<std::string> names;
  for (size_t at : balanced_stage_starts(costs, stages)) names.push_back(graph.nodes()[at].name);
  return names;
}

// Every rank compiles the whole model's plan (not allocated) for its FLOPs, so all cut alike.
PipelineTrainingSession::PipelineTrainingSession(const Graph& graph,
                                                 const TrainingSessionOptions& o,
                                                 const PipelineOptions& p, Communicator& world)
    : whole_(graph, plan_only(o.session)),
      ranks_(pipeline_ranks(world, p.stages, p.stages_key, group_size_of(o.session))) {
  refuse_unsupported(o, p);
  const std::vector<double> costs =
      p.costs.empty() ? node_training_flops(graph, whole_.executor()) : p.costs;
  graphs_ = cut_into_stages(
      graph, pipeline_stage_starts(p.stage_starts, graph, costs, p.stages, p.stage_starts_key),
      p.stage_starts_key);
  const int rank = world.rank(), next = ranks_.group_size;  // the same place, one stage on
  stage_ = std::make_unique<PipelineStage>(
      stage_graph(), whole_.backend(), stage_compile_options(o, whole_.backend()), world,
      PipelineStageOptions{.stage = ranks_.stage,
                           .stages = ranks_.stages,
                           .micro_batches = p.micro_batches,
                           .schedule = p.schedule,
                           .recompute = p.recompute,
                           .previous_rank = ranks_.stage > 0 ? rank - next : -1,
                           .next_rank = ranks_.last_stage() ? -1 : rank + next});
  // A stage's groups are consecutive in its replicas' communicator (batch norm sums a group's).
  const int in_replicas = ranks_.replica * ranks_.group_size + ranks_.place;
  replicas_ = world.split(ranks_.stage, in_replicas);
  pipeline_ = world.split(in_replicas, ranks_.stage);
  synchronise_batch_norm(o.batchnorm_group_size);
  optimizer_ = make_optimizer(o.optimizer);
  if (o.loss_scaling) scaler_ = std::make_unique<LossScaler>(*o.loss_scaling);
  step_ = std::make_unique<PipelineTrainStep>(
      *stage_, *optimizer_,
      PipelineStepComms{world, replicas_.get(), pipeline_.get(), o.spatial_group},
      PipelineStepOptions{o.sync, o.gradient_lag, scaler_.get(), o.lag_local_correction});
  saved_ = std::make_unique<PipelineSavedState>(*this, world);
  // Every rank checks the file against the whole model and reads its stage's part: the same file
  // everywhere, so no message, and the same errors on every rank.
  if (!o.init_weights.empty())
    load_weights_part(executor().params(), whole_.executor().params(), o.init_weights,
                      o.external_names);
}

// Synchronised batch norm (dist.batchnorm_group_size g): each stage's batch norms sum their
// statistics over g consecutive replicas of the stage, micro-batch by micro-batch, so micro-batch
// m of replicas d..d+g-1 is normalised as one batch, as g data-parallel ranks accumulating
// normalise theirs. Every replica runs the same schedule, so the group's collectives meet in the
// same order on each of its ranks.
void PipelineTrainingSession::synchronise_batch_norm(int group_size) {
  if (group_size > 1 && ranks_.replicas % group_size != 0)
    throw_input("dist.batchnorm_group_size: " + std::to_string(group_size) +
                " does not divide the " + std::to_string(ranks_.replicas) +
                " data-parallel replicas of each pipeline stage into groups of consecutive ones");
  bn_group_ = make_batch_norm_group(*replicas_, group_size, ranks_.group_size);
  stage_->set_batch_stat_reducer(bn_group_.get());
}

}  // namespace crest
