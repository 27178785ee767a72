// run_training: the orchestration of a run. What a run does with its records (checkpoints,
// validation, stop rules, logs, observers) lives in components of its own; this file only says
// in which order they act.
#include "crest/train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iomanip>
#include <map>
#include <ostream>
#include <sstream>
#include <type_traits>

#include "batch_ahead.hpp"
#include "checkpointer.hpp"
#include "config/text.hpp"
#include "crest/core/cpus.hpp"
#include "crest/core/error.hpp"
#include "crest/core/node_memory.hpp"
#include "crest/core/units.hpp"
#include "crest/data/loader.hpp"
#include "crest/dist/communicator.hpp"
#include "crest/dist/gradient_sync.hpp"
#include "crest/dist/timeline.hpp"
#include "crest/engine/batch_norm_sync.hpp"
#include "crest/engine/pipeline_training_session.hpp"
#include "crest/engine/saved_state.hpp"
#include "crest/engine/training_session.hpp"
#include "crest/engine/weights.hpp"
#include "crest/optim/loss_scaler.hpp"
#include "crest/spatial/halo_exchange.hpp"
#include "crest/spatial/hybrid_groups.hpp"
#include "crest/train/batch_feed.hpp"
#include "crest/train/checkpoint.hpp"
#include "crest/train/observers.hpp"
#include "crest/train/run_directory.hpp"
#include "crest/train/stop_signals.hpp"
#include "crest/train/task.hpp"
#include "crest/train/training_data.hpp"
#include "epoch_log.hpp"
#include "last_batch_figures.hpp"
#include "pipeline_batches.hpp"
#include "rank_failure.hpp"
#include "resume.hpp"
#include "run_layouts.hpp"
#include "run_status.hpp"
#include "step_timeline.hpp"
#include "stop_rules.hpp"
#include "test_faults.hpp"
#include "time_budget.hpp"
#include "validation.hpp"

namespace crest {
namespace {

// Every rank's `mine`, a plain struct without padding, in rank order. Collective.
template <typename T>
std::vector<T> gathered(Communicator& comm, const T& mine) {
  static_assert(std::is_trivially_copyable_v<T> && std::has_unique_object_representations_v<T>);
  const auto* raw = reinterpret_cast<const std::byte*>(&mine);
  std::vector<T> all;
  for (const std::vector<std::byte>& part :
       comm.allgather_parts(std::vector<std::byte>(raw, raw + sizeof mine))) {
    CREST_CHECK(part.size() == sizeof(T), "a gathered part of the wrong size");
    std::memcpy(&all.emplace_back(), part.data(), sizeof(T));
  }
  return all;
}

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// train.loss_scaling: dynamic's scaler settings, none when it is off.
std::optional<LossScalerOptions> loss_scaling_options(const TrainConfig& t) {
  if (t.loss_scaling == LossScaling::off) return std::nullopt;
  return LossScalerOptions{.initial_scale = t.loss_scale_initial,
                           .growth_interval = t.loss_scale_growth_interval,
                           .growth_factor = t.loss_scale_growth_factor,
                           .backoff_factor = t.loss_scale_backoff_factor};
}

// Rank 0's records of the run: its log (also output_dir/train.log) and the observers. Made
// before anything slow, so a path that cannot be written fails the job at once, on every rank.
struct RunRecords {
  std::unique_ptr<RunLog> log;
  std::vector<std::unique_ptr<RunObserver>> owned;
  std::vector<RunObserver*> observers;

  template <typename Call>
  void notify(Call&& call) {
    for (RunObserver* o : observers) call(*o);
  }
};

// Thrown inside an epoch when train.on_nonfinite: rollback sends the run back to `checkpoint`;
// caught by the epoch loop (not a crest::Error: nothing went wrong that the user must see).
struct RollBack {
  std::string checkpoint;
};

// Default compute threads: this node's cores shared among the ranks on it.
int compute_threads(const Config& config, const Communicator& comm) {
  return compute_threads_per_rank(config, comm.local_size());
}

class TrainingRun {
 public:
  TrainingRun(const Config& config, const TrainOptions& options, std::ostream& all_ranks_log);
  TrainSummary run();

 private:
  void open_records();
  TrainingSessionOptions session_options() const;
  void act_on_decision(int epoch, int64_t s, const StepResult& r);
  std::string exchange_schedule() const;
  void compile();
  void compile_pipeline();
  void print_header();
  void print_pipeline_plan();
  struct StagePlan {
    int64_t planned = 0, activation_sets = 0;  // no padding: the bytes are gathered
  };
  std::vector<StagePlan> stage_plans() const;
  std::vector<double> measured_stage_costs(const SessionOptions& micro_batch) const;
  std::vector<double> rebalanced_stage_costs(TrainingSessionOptions to, PipelineOptions po);
  std::string stage_ranks_text(int s) const;
  void print_dry_run();
  void print_spatial_plan();
  // `pred`: the prediction's value in `ex`'s graph.
  void make_scoring(const Executor& ex, ValueId pred);
  void open_data();
  void read_only_what_is_fed();
  void open_train_loader(int rollbacks);
  DType sample_dtype() const;
  MemoryResource& batch_memory() const;
  RunFacts facts() const;
  TrainSummary train();
  bool train_epoch(int epoch, EpochStats& st);
  bool train_one_step(int epoch, int64_t s, double lr, double& loss_sum, Clock::time_point t0);
  std::optional<LoadedBatch> next_batch(double& got);
  // The next step's batch, read while this step's is fed (train_ahead_).
  void read_ahead(int64_t s);
  StepResult run_step(double lr, bool stop_here);
  StepResult run_pipeline_step(double lr, const LoadedBatch* batch, bool stop_here);
  // Gradient lag: waits for the allreduce in flight (data-parallel or a pipeline stage's).
  void settle_lagged_gradients();
  void write_checkpoint_at(const TrainingPosition& at);
  void write_step_checkpoint(int epoch, int64_t steps_done, double loss_sum);
  void stop_early(int epoch, int64_t steps_done);
  struct ObserverRequests {
    bool stop = false, checkpoint = false;
  };
  ObserverRequests agree_observer_requests();
  void on_nonfinite(int epoch, int64_t s, const StepResult& r);
  void on_overflow(const StepResult& r);
  int64_t schedule_step() const;
  void roll_back(const std::string& checkpoint);
  void resume_from(const RunDirectory& from);
  void write_status(RunStatus st);
  void record_failure(const Error& e);
  void reduce_epoch_figures(EpochStats& st, double loss_sum, int64_t steps_run);
  void validate_epoch(int epoch, EpochStats& st);
  bool finish_epoch(int epoch, EpochStats& st);
  void finish();

  const Config& config_;
  const TrainOptions& options_;
  std::ostream& all_ranks_log_;
  std::ostream discard_{nullptr};
  const Clock::time_point started_ = Clock::now();
  std::unique_ptr<Communicator> owned_comm_;  // the world, unless options.communicator is given
  Communicator* comm_ = nullptr;
  // dist.spatial: the spatial groups and the data-parallel shards (the world without a split).
  HybridGroups groups_;
  Communicator& data_comm() const { return groups_.data_comm(*comm_); }
  // The communicator whose rank and size shard the samples among the loaders: data_comm(), or
  // under dist.pipeline the ranks holding this rank's stage at its place in the stage's spatial
  // group (each replica's stages read alike, and a group's ranks read blocks of one sample).
  Communicator& shard_comm() const {
    if (!pipeline_) return data_comm();
    return groups_.stage_data ? *groups_.stage_data : pipeline_->replicas();
  }
  // How many ranks report each replica's step loss (a spatial group's ranks all do, and under
  // dist.pipeline every stage's): sums over the world divided by it count each sample once.
  int ranks_per_loss() const {
    return groups_.ranks_per_sample * (pipeline_ ? pipeline_->ranks().stages : 1);
  }
  // Whether this rank's figures count samples (loss sums, skipped samples): under dist.pipeline
  // only the last stage's do, so sums over data_comm() count each sample once.
  bool counts_samples() const { return !pipeline_ || pipeline_->ranks().last_stage(); }
  // Whether this rank reads samples: under dist.pipeline only the stages that feed the model's
  // inputs do (the first the samples, the last the targets); the stages between compute on what
  // they receive, and read nothing.
  bool reads_data() const { return !pipeline_ || !pipeline_->stage_graph().data_inputs.empty(); }
  bool feeds_samples() const;
  std::optional<SampleBlock> fed_sample_block() const;
  // The batches of this rank's shard of `source` per epoch, as a loader with `o` plans them.
  int64_t shard_batches(const SampleSource& source, const LoaderOptions& o) const {
    return plan_shards(source.size(), o.batch_size, shard_comm().rank(), shard_comm().size(),
                       o.every_sample)
        .batches;
  }
  RunDirectory run_dir_;
  RunRecords records_;
  std::ostream* log_ = &discard_;
  int threads_ = 1;
  Task task_;
  // The backend, executor, optimizer, gradient exchange and step; after task_, whose graph the
  // executor keeps. The pointers below are into it.
  std::unique_ptr<TrainingSession> training_;
  Backend* backend_ = nullptr;
  Executor* ex_ = nullptr;
  Optimizer* optimizer_ = nullptr;
  GradientSync* sync_ = nullptr;
  LossScaler* scaler_ = nullptr;  // dynamic loss scaling; null: off
  TrainStep* step_ = nullptr;     // null under dist.pipeline
  // dist.pipeline: this rank's stage, and its batches cut into micro-batches.
  std::unique_ptr<PipelineTrainingSession> pipeline_;
  int pipeline_recuts_ = 0;  // how often dist.pipeline.rebalance moved the cut
  std::unique_ptr<PipelineBatches> pipeline_batches_;
  std::unique_ptr<LrPolicy> lr_policy_;
  std::unique_ptr<BatchFeed> feed_;
  std::unique_ptr<MetricScoring> scoring_;  // the task's metrics on this rank's prediction
  std::unique_ptr<LastBatchFigures> last_batch_;
  TrainingData data_;
  std::unique_ptr<DataLoader> train_loader_, valid_loader_;  // null where !reads_data()
  // The training loader's batches, the next step's read while this one's is fed: on a device its
  // copy runs while this step computes. Made with train_loader_.
  std::unique_ptr<BatchAhead> train_ahead_;
  bool reads_ahead() const;  // TrainOptions::read_ahead for this rank's model
  std::optional<bool> read_ahead_asked() const;
  int64_t valid_batches_ = 0;  // per epoch; 0: no validation
  int64_t train_steps_ = 0;
  // What checkpoints and weight files save: the pipeline's stages, or this process's model.
  std::unique_ptr<ProcessSavedState> process_state_;
  SavedState& saved_state() const {
    return pipeline_ ? pipeline_->saved_state() : static_cast<SavedState&>(*process_state_);
  }
  std::unique_ptr<Checkpointer> checkpointer_;
  RankFailure rank_failure_;  // this rank could not read a training batch
  std::unique_ptr<StopRules> stop_rules_;
  std::unique_ptr<Timeline> timeline_;
  std::unique_ptr<EpochLog> epoch_log_;
  TrainingPosition pos_;
  TrainSummary summary_;
  int64_t profiled_steps_ = 0;
  // The split layers' halo exchanges of the training steps (bank_training_halo).
  std::map<std::string, SpatialSplit::HaloLayer> training_halo_;
  void bank_training_halo();
  // Ending early and cleanly (docs/checkpoints.md "Stopping before the end").
  std::unique_ptr<StopSignals> signals_;
  std::unique_ptr<TimeBudget> budget_;
  bool stop_requested_ = false;        // job-wide: some rank asked, the run stops after this step
  RunControl control_;                 // rank 0's observers' requests (finish_epoch acts on them)
  int64_t last_checkpoint_step_ = -1;  // the global step of the newest checkpoint written
  int at_epoch_ = 0;                   // where the run stands, for status.json (0-based)
  int64_t at_step_ = 0;                // steps of at_epoch_ done
};

TrainingRun::TrainingRun(const Config& config, const TrainOptions& options,
                         std::ostream& all_ranks_log)
    : config_(config), options_(options), all_ranks_log_(all_ranks_log) {
  comm_ = options.communicator;
  if (!comm_) {
    WorldOptions wo;
    wo.backend = config.dist.backend;
    wo.timeout_s = config.dist.timeout_s;
    owned_comm_ = make_world_communicator(wo);
    comm_ = owned_comm_.get();
  }
  const std::vector<int64_t>& parts = config.dist.spatial;
  groups_ = make_hybrid_groups(*comm_, std::vector<int>(parts.begin(), parts.end()), "dist.spatial",
                               parse_halo_overlap(config.dist.halo_overlap, "dist.halo_overlap"),
                               std::max(1, config.dist.pipeline.stages));
  // Before anything slow: the run directory must be usable (and a resume possible).
  if (!options.dry_run)
    run_dir_ = prepare_run_directory(config, options.resume, options.overwrite, *comm_);
  // The task before the records: a wrong model fails first, and the records name the task.
  task_ = make_task(config);
  open_records();
}

void TrainingRun::open_records() {
  std::string problem;  // rank 0's, shared so every rank stops with it
  if (comm_->rank() == 0) {
    try {
      const bool to_file = !run_dir_.checkpoint_dir.empty();
      records_.log = std::make_unique<RunLog>(
          all_ranks_log_, to_file ? config_.output_dir + "/train.log" : "", options_.resume);
      log_ = &records_.log->stream();
      for (const std::string& line : run_dir_.skipped) *log_ << "resume: " << line << "\n";
      if (run_dir_.resume_info) {
        const TrainingPosition& p = run_dir_.resume_info->position;
        *log_ << "resuming " << config_.output_dir << " from " << run_dir_.resume_from << " (epoch "
              << p.epoch + 1 << ", step " << p.step_in_epoch << " of it; " << p.global_step
              << " steps done)\n";
      }
      if (!options_.dry_run)
        records_.owned =
            make_run_observers(config_, task_, *log_, options_.resume, options_.progress_bar);
    } catch (const Error& e) {
      problem = e.what();
    }
  }
  fail_with_rank0(*comm_, problem);
  for (auto& o : records_.owned) records_.observers.push_back(o.get());
  if (comm_->rank() == 0)
    records_.observers.insert(records_.observers.end(), options_.extra_observers.begin(),
                              options_.extra_observers.end());
}

// The engine session of this rank: its backend, compiled model, optimizer and gradient exchange.
TrainingSessionOptions TrainingRun::session_options() const {
  TrainingSessionOptions to;
  SessionOptions& so = to.session;
  so.backend = config_.crest.backend;
  so.threads = compute_threads(config_, *comm_);
  so.layout_tuning =
      run_layout_tuning(config_, run_dir_.checkpoint_dir.empty() ? "" : config_.output_dir,
                        comm_->rank(), options_.resume);
  so.precision = config_.crest.precision;
  so.batch = config_.data.batch_size;
  so.seed = config_.data.seed;
  so.spatial = groups_.split;
  so.split_outputs = true;  // the metrics score the prediction's blocks (make_scoring)
  const MemoryLimit limit = memory_limit_per_rank(config_, comm_->local_size());
  so.memory_limit = limit.bytes;
  so.memory_limit_source = limit.source;
  so.memory_limit_set = limit.set;
  so.allocate = !options_.dry_run;  // a plan may be larger than this machine
  // As reads_ahead() decides, before the model exists: a device's memory holds a second batch.
  so.stages_batches =
      config_.dist.pipeline.stages <= 1 && read_ahead_asked().value_or(true);  // where on a device
  to.optimizer = config_.optimizer;
  to.accumulation = config_.train.gradient_accumulation_frequency;
  to.gradient_lag = config_.train.gradient_lag > 0;
  to.lag_local_correction = config_.train.gradient_lag_local_correction;
  to.step_graphs = config_.crest.cuda_graphs;
  to.sync = {.first_bucket_mb = config_.dist.first_bucket_mb,
             .bucket_mb = config_.dist.bucket_mb,
             .compression = parse_gradient_compression(config_.dist.compress),
             .timeout_s = config_.dist.timeout_s};
  to.batchnorm_group_size = config_.dist.batchnorm_group_size;
  to.spatial_group = groups_.spatial.get();
  to.loss_scaling = loss_scaling_options(config_.train);
  to.init_weights = options_.init_weights;
  to.external_names = task_.model.external_params;
  return to;
}

// The model on this rank's backend, its optimizer, and the data-parallel gradient exchange.
void TrainingRun::compile() {
  if (config_.dist.pipeline.stages > 1) return compile_pipeline();
  const TrainingSessionOptions to = session_options();
  // Data parallelism: the same layout everywhere (verified), rank 0's weights everywhere, and
  // gradient buckets averaged while backward runs.
  training_ = std::make_unique<TrainingSession>(task_.model.graph, to, *comm_);
  backend_ = &training_->backend();
  ex_ = &training_->executor();
  optimizer_ = &training_->optimizer();
  sync_ = &training_->sync();
  scaler_ = training_->scaler();
  step_ = &training_->step();
  // Reported is what the backend really uses (the reference backend: one thread, whatever was
  // asked).
  threads_ = training_->session().threads();
  if (const std::string line = describe_layout_tuning(*to.session.layout_tuning); !line.empty())
    *log_ << line << "\n";
  // The schedule scales by the batch one optimizer step averages over: every rank's micro-batches.
  lr_policy_ = lr_policy_of(config_.lr_schedule, effective_batch(config_, groups_.data_parallel));
  feed_ = std::make_unique<BatchFeed>(*ex_, task_.model);
  make_scoring(*ex_, task_.model.prediction);
  summary_.parameter_count = ex_->params().parameter_count();
  summary_.planned_bytes = ex_->planned_memory().total();
}

// The task's metrics on the prediction of `ex`: its blocks where it stays split (a spatial split:
// SessionOptions::split_outputs), scored against the targets' blocks and summed over the group.
// A metric that cannot read the model's whole prediction fails now, not after the first epoch.
void TrainingRun::make_scoring(const Executor& ex, ValueId pred) {
  TensorDesc whole = ex.output(pred).desc();
  whole.shape = ex.output_whole_shape(pred);
  check_metrics_fit(task_, config_, whole, ex.input(task_.model.target_input).desc());
  scoring_ = whole.shape == ex.output(pred).shape()
                 ? std::make_unique<MetricScoring>(task_.metrics)
                 : std::make_unique<MetricScoring>(task_.metrics, groups_.split.get(),
                                                   whole.shape.without_batch());
  last_batch_ = std::make_unique<LastBatchFigures>(*scoring_);
}

// dist.pipeline: this rank's stage at the micro-batch size, its optimizer, and the replicas'
// gradient exchange. The batch (data.batch_size) is each replica's; the ranks are stages x
// replicas, so the data-parallel degree is the replicas'.
void TrainingRun::compile_pipeline() {
  const PipelineConfig& pc = config_.dist.pipeline;
  TrainingSessionOptions to = session_options();
  to.session.batch = config_.data.batch_size / pc.micro_batches;
  PipelineOptions po;
  po.stages = pc.stages;
  po.micro_batches = pc.micro_batches;
  po.schedule = pc.schedule == "gpipe" ? PipelineScheduleKind::gpipe
                                       : PipelineScheduleKind::one_forward_one_backward;
  po.recompute = pc.recompute;
  po.stage_starts = pc.stage_starts;
  po.costs = measured_stage_costs(to.session);
  po.costs = rebalanced_stage_costs(to, po);
  pipeline_ = std::make_unique<PipelineTrainingSession>(task_.model.graph, to, po, *comm_);
  groups_.data_parallel = pipeline_->ranks().replicas;
  backend_ = &pipeline_->backend();
  ex_ = &pipeline_->executor();
  optimizer_ = &pipeline_->optimizer();
  scaler_ = pipeline_->scaler();
  threads_ = pipeline_->whole().threads();
  lr_policy_ = lr_policy_of(config_.lr_schedule, effective_batch(config_, groups_.data_parallel));
  pipeline_batches_ = std::make_unique<PipelineBatches>(*pipeline_, task_.model,
                                                        config_.data.batch_size, pc.micro_batches);
  // The last stage scores its prediction (blocks of it under a spatial split); the others only
  // add up the sums, so the whole model's prediction describes it for them.
  if (pipeline_batches_->prediction() >= 0)
    make_scoring(*ex_, pipeline_batches_->prediction());
  else
    make_scoring(pipeline_->whole().executor(), task_.model.prediction);
  const Executor& whole = pipeline_->whole().executor();
  summary_.parameter_count = whole.params().parameter_count();
  summary_.planned_bytes = ex_->planned_memory().total();  // every activation set's included
}

// dist.pipeline.rebalance: the time-balanced cut corrected from the stages' own compute times,
// each round measured on a session made for it (its probe batches train it on random inputs;
// it is gone before the run's session is made, whose weights start as they would have).
std::vector<double> TrainingRun::rebalanced_stage_costs(TrainingSessionOptions to,
                                                        PipelineOptions po) {
  constexpr int kProbeBatches = 3;
  to.init_weights.clear();  // the probes' weights do not matter
  for (int round = 0; round < config_.dist.pipeline.rebalance && !po.costs.empty(); ++round) {
    std::vector<double> stage_s;
    {
      PipelineTrainingSession probe(task_.model.graph, to, po, *comm_);
      stage_s = probe_stage_compute(probe, task_.model, kProbeBatches, *comm_);
    }
    std::vector<double> next = rebalanced_costs(po.costs, po.stages, stage_s);
    if (next.empty()) break;
    po.costs = std::move(next);
    ++pipeline_recuts_;
  }
  return po.costs;
}

// dist.pipeline.balance: time, the default cut: every node's measured cost at the micro-batch
// size, measured on rank 0 and broadcast so every rank cuts alike. Empty (the FLOPs decide) for
// balance: flops, a named cut, or a dry run (which runs nothing).
std::vector<double> TrainingRun::measured_stage_costs(const SessionOptions& micro_batch) const {
  const PipelineConfig& pc = config_.dist.pipeline;
  if (pc.balance != "time" || !pc.stage_starts.empty() || options_.dry_run) return {};
  std::vector<double> costs(task_.model.graph.nodes().size());
  std::string problem;  // rank 0's, shared so every rank stops with it
  if (comm_->rank() == 0) {
    try {
      costs = measured_node_costs(task_.model, micro_batch);
    } catch (const Error& e) {
      problem = std::string("dist.pipeline.balance time: measuring the whole model: ") + e.what() +
                " (dist.pipeline.balance: flops, or a cut named in dist.pipeline.stage_starts, "
                "cuts without running the whole model)";
    }
  }
  fail_with_rank0(*comm_, problem);
  comm_->broadcast(costs.data(), costs.size() * sizeof(double), 0);
  return costs;
}

void TrainingRun::print_header() {
  std::ostream& log = *log_;
  const int64_t batch = config_.data.batch_size;
  log << "crest " << CREST_VERSION << " | config " << config_.source << " | backend "
      << backend_->name();
  if (const std::string isa = backend_->instruction_sets(); !isa.empty()) log << " (" << isa << ")";
  log << " | " << threads_ << (threads_ == 1 ? " thread" : " threads");
  if (config_.crest.threads == 0 && parse_omp_num_threads(std::getenv("OMP_NUM_THREADS")) > 0)
    log << " (OMP_NUM_THREADS)";
  if (comm_->size() > 1) {
    log << " per rank | " << comm_->size() << " ranks (" << comm_->name() << ", "
        << comm_->local_size() << " on this node) | ";
    if (pipeline_) {
      log << "dist.pipeline: " << pipeline_->ranks().stages << " stages x " << groups_.data_parallel
          << " data-parallel";
      if (groups_.split)
        log << ", each stage's samples split among " << groups_.ranks_per_sample
            << " ranks (dist.spatial " << config::list_text(config_.dist.spatial) << ")";
      log << " | batch " << batch << " per replica in " << config_.dist.pipeline.micro_batches
          << " micro-batches, ";
    } else if (groups_.split) {
      log << "dist.spatial " << config::list_text(config_.dist.spatial)
          << ": each sample split among " << groups_.ranks_per_sample << " ranks, "
          << groups_.data_parallel << " data-parallel | batch " << batch << " per group, ";
    } else {
      log << "batch " << batch << " per rank, ";
    }
    log << batch * groups_.data_parallel << " global";
    if (sync_) {
      log << " | " << sync_->buckets().size() << " gradient buckets";
      if (const std::string how = sync_->reduction(); !how.empty()) log << " reduced " << how;
    }
    log << exchange_schedule() << "\n";
    if (pipeline_) print_pipeline_plan();
  } else
    log << " | batch " << batch << "\n";
  if (backend_->name() == "reference") {
    log << "warning: crest.backend=reference: the reference kernels are plain single-threaded "
           "loops, a correctness oracle for tests; training runs about 100x slower than ";
    const std::string fastest = default_backend_name();
    if (fastest != "reference")
      log << "with crest.backend=" << fastest << " (the default)\n";
    else
      log << "on oneDNN, which this build does not have (run scripts/install-onednn.sh and "
             "rebuild)\n";
  }
}

// The stages' layers and this run's schedule (rank 0 knows every stage's graph).
void TrainingRun::print_pipeline_plan() {
  const PipelineConfig& pc = config_.dist.pipeline;
  std::ostream& log = *log_;
  log << "pipeline: " << pc.schedule << " schedule"
      << (pc.recompute ? ", forward recomputed before each backward" : "") << ", stages cut "
      << (!pc.stage_starts.empty()                    ? "at dist.pipeline.stage_starts"
          : pc.balance == "time" && !options_.dry_run ? "where their measured time balances"
                                                      : "where their FLOPs balance");
  if (pipeline_recuts_ > 0)
    log << " (re-cut " << pipeline_recuts_ << (pipeline_recuts_ == 1 ? " time" : " times")
        << " from the stages' measured compute times)";
  log << "\n";
  const std::vector<StagePlan> plans = stage_plans();
  const auto& graphs = pipeline_->graphs();
  for (size_t s = 0; s < graphs.size(); ++s) {
    const PipelineStageGraph& g = graphs[s];
    std::string reads;  // reads_data(): the stages without the model's inputs read nothing
    for (const std::string& input : g.data_inputs) reads += (reads.empty() ? "" : ", ") + input;
    const bool samples = std::find(g.data_inputs.begin(), g.data_inputs.end(),
                                   task_.model.sample_input) != g.data_inputs.end();
    log << "  stage " << s << " (ranks " << stage_ranks_text(static_cast<int>(s))
        << ", ...): " << g.first_node_name << " .. " << g.last_node_name << ", reads "
        << (reads.empty() ? "no data"
            : samples     ? "data (" + reads + ")"
                          : "the targets alone (" + reads + ")")
        << ", sends "
        << (g.sent.empty() ? "nothing (the loss)" : std::to_string(g.sent.size()) + " tensors on")
        << ", plans " << human_bytes(static_cast<double>(plans[s].planned)) << " ("
        << plans[s].activation_sets
        << (plans[s].activation_sets == 1 ? " activation set)" : " activation sets)") << "\n";
  }
}

// Each stage's planned memory (what its compile checked against the limit; the most any of its
// ranks plans) and activation sets: every rank's, gathered. Collective.
std::vector<TrainingRun::StagePlan> TrainingRun::stage_plans() const {
  const std::vector<StagePlan> all =
      gathered(*comm_, StagePlan{static_cast<int64_t>(summary_.planned_bytes),
                                 pipeline_->stage().activation_sets()});
  std::vector<StagePlan> plans(static_cast<size_t>(pipeline_->ranks().stages));
  for (size_t r = 0; r < all.size(); ++r) {
    const StagePlan& p = all[r];
    StagePlan& stage = plans[(r / static_cast<size_t>(groups_.ranks_per_sample)) % plans.size()];
    stage.planned = std::max(stage.planned, p.planned);
    stage.activation_sets = p.activation_sets;
  }
  return plans;
}

// The ranks of stage `s` in the first two replicas: "1, 3" (2 stages), "2-3, 6-7" (2 stages, each
// split among 2 ranks).
std::string TrainingRun::stage_ranks_text(int s) const {
  const int group = groups_.ranks_per_sample, stages = pipeline_->ranks().stages;
  std::string text;
  for (int replica = 0; replica < 2; ++replica) {
    const int first = (replica * stages + s) * group;
    text += (replica ? ", " : "") + std::to_string(first);
    if (group > 1) text += "-" + std::to_string(first + group - 1);
  }
  return text;
}

// How gradients meet, where it is not every step's synchronous allreduce.
std::string TrainingRun::exchange_schedule() const {
  const TrainConfig& t = config_.train;
  const std::string corrected =
      t.gradient_lag_local_correction ? " with each rank's own gradient in its share's place" : "";
  if (t.gradient_lag > 0 && t.gradient_lag_start_epoch > 0)
    return ", applied one step late" + corrected + " after " +
           std::to_string(t.gradient_lag_start_epoch) + " synchronous epochs (train.gradient_lag)";
  if (t.gradient_lag > 0) return ", applied one step late" + corrected + " (train.gradient_lag: 1)";
  if (t.local_sgd_steps <= 1) return "";
  std::string s = ", local SGD: models averaged every " + std::to_string(t.local_sgd_steps) +
                  " steps and at each epoch's end";
  if (t.local_sgd_start_epoch > 0)
    s += ", after " + std::to_string(t.local_sgd_start_epoch) + " synchronous epochs";
  return s;
}

void TrainingRun::print_dry_run() {
  std::ostream& log = *log_;
  const auto bytes = [](size_t b) { return human_bytes(static_cast<double>(b)); };
  const PlannedMemory planned = ex_->planned_memory();
  log << ex_->summary();
  if (const std::string notes = optimizer_->notes(); !notes.empty()) log << notes << "\n";
  log << "total parameters: " << with_thousands(summary_.parameter_count) << "\n";
  log << "planned memory: " << bytes(planned.total()) << " (activations and kernel scratch "
      << bytes(planned.activations) << ", parameters+gradients " << bytes(planned.parameters)
      << ", optimizer state " << bytes(planned.state);
  if (planned.inputs > 0) log << ", the next batch's inputs " << bytes(planned.inputs);
  log << ")\n";
  log << "compiled in " << std::fixed << std::setprecision(2)
      << (pipeline_ ? pipeline_->whole() : training_->session()).compile_seconds()
      << " s; dry run: no data read, nothing written\n";
}

// Every rank's part of a split sample, its planned memory, its halo traffic per step and how many
// of its windowed layers with a halo overlap the exchange with compute (dist.halo_overlap), on
// rank 0 (collective): the ranks of a group differ (edge blocks exchange with one neighbour per
// axis, and have the smaller boundary).
void TrainingRun::print_spatial_plan() {
  struct RankPlan {
    int64_t planned = 0, halo_forward = 0, halo_backward = 0;
    int64_t block[3] = {0, 0, 0};
    int64_t with_halo = 0, overlapped = 0;
  } mine;
  mine.planned = static_cast<int64_t>(summary_.planned_bytes);
  const SpatialSplit::HaloTraffic t = groups_.split->halo_traffic();
  mine.halo_forward = static_cast<int64_t>(t.forward);
  mine.halo_backward = static_cast<int64_t>(t.backward);
  for (const SpatialSplit::HaloLayer& l : groups_.split->halo_layers()) {
    mine.with_halo += l.overlap != "no halo";
    mine.overlapped += l.overlap.rfind("overlapped", 0) == 0;
  }
  if (feeds_samples()) {  // (a pipeline's stages after the first hold no samples)
    const Shape block = ex_->input(task_.model.sample_input).shape();  // [n, c, spatial...]
    for (int a = 2; a < block.rank() && a < 5; ++a) mine.block[a - 2] = block[a];
  }
  const std::vector<RankPlan> all = gathered(*comm_, mine);
  std::ostream& log = *log_;
  const auto bytes = [](int64_t b) { return human_bytes(static_cast<double>(b)); };
  log << "per-rank plan (dist.spatial " << config::list_text(config_.dist.spatial)
      << "; halo: bytes received per step, forward + backward; overlapped: layers computing while "
         "their halo travels, dist.halo_overlap "
      << config_.dist.halo_overlap << "):\n";
  log << "  rank  group  sample block      planned memory  halo per step          overlapped\n";
  for (size_t r = 0; r < all.size(); ++r) {
    const RankPlan& p = all[r];
    std::vector<int64_t> dims(p.block, p.block + config_.dist.spatial.size());
    log << "  " << std::setw(4) << r << "  " << std::setw(5)
        << static_cast<int>(r) / groups_.ranks_per_sample << "  " << std::left << std::setw(16)
        << config::list_text(dims) << std::right << "  " << std::setw(14) << bytes(p.planned)
        << "  " << std::left << std::setw(21)
        << (bytes(p.halo_forward) + " + " + bytes(p.halo_backward)) << std::right << "  "
        << p.overlapped << " of " << p.with_halo << "\n";
  }
}

void TrainingRun::open_data() {
  const DataConfig& dc = config_.data;
  if (options_.train_samples) {
    data_.train = options_.train_samples;
    data_.valid = options_.valid_samples;
  } else {
    if (!dc.stage_dir.empty()) records_.notify([](RunObserver& o) { o.staging_start(); });
    data_ = open_training_data(config_, *comm_, *log_);
    if (!dc.stage_dir.empty())
      records_.notify([&](RunObserver& o) { o.staging_stop(data_.stage_s); });
  }
  summary_.stage_s = data_.stage_s;
  // The classes the network predicts: the prediction's channel axis ([N, K, ...]).
  const Executor& whole = pipeline_ ? pipeline_->whole().executor() : *ex_;
  const Shape predicted = whole.output_whole_shape(task_.model.prediction);
  check_label_classes(data_, predicted.rank() >= 2 ? predicted[1] : 0, dc);
  read_only_what_is_fed();
  open_train_loader(0);
  if (train_loader_)  // rank 0's (it reads: the first stage of a pipeline does)
    *log_ << "train data: " << data_.train->format() << ", " << train_loader_->plan().describe()
          << " (" << train_loader_->threads() << " reader threads, " << dc.prefetch
          << " batches ahead)\n";
  if (data_.valid) {
    LoaderOptions vo = validation_loader_options(dc);
    vo.sample_dtype = sample_dtype();
    vo.batch_memory = &batch_memory();
    if (reads_data()) {
      valid_loader_ = std::make_unique<DataLoader>(data_.valid, vo, shard_comm());
      *log_ << "validation data: " << valid_loader_->plan().describe() << "\n";
    }
    valid_batches_ = shard_batches(*data_.valid, vo);
  }
  train_steps_ = shard_batches(*data_.train, loader_options(dc));
}

// Each rank reads only what it feeds. Under a spatial split, its block of each sample: only the
// block's bytes where the format allows it (npy, DeepCAM HDF5 and data-/label- npy), else the
// whole sample, decoded, of which it keeps the block. A pipeline stage that feeds the targets but
// not the samples (the last), the targets alone: only their bytes where the format allows it
// (an image folder reads nothing, CosmoFlow npy its label file), else the whole record, of which
// it decodes the targets (a TFRecord's label feature, not its JPEG or volume).
void TrainingRun::read_only_what_is_fed() {
  if (pipeline_ && reads_data() && !feeds_samples()) {
    data_.train = targets_of_samples(data_.train);
    if (data_.valid) data_.valid = targets_of_samples(data_.valid);
    return;
  }
  const std::optional<SampleBlock> block = fed_sample_block();
  if (!block) return;
  data_.train = block_of_samples(data_.train, *block);
  if (data_.valid) data_.valid = block_of_samples(data_.valid, *block);
  *log_ << "spatial split: each rank reads its block of every sample ("
        << (data_.train->reads_blocks()
                ? "only the block's bytes"
                : data_.train->format() + ": each rank reads and decodes the whole sample")
        << ")\n";
}

// Under a spatial split, the block of each sample this rank's model holds (a pipeline: where its
// stage reads the samples).
std::optional<SampleBlock> TrainingRun::fed_sample_block() const {
  if (!pipeline_) return feed_ ? feed_->sample_block() : std::nullopt;
  if (!feeds_samples()) return std::nullopt;
  return BatchFeed(*ex_, task_.model, pipeline_->stage_graph().data_inputs, -1).sample_block();
}

// The training loader; after k rollbacks (train.on_nonfinite: rollback) its order comes from
// another seed, so the run does not meet the same batches in the same order again.
void TrainingRun::open_train_loader(int rollbacks) {
  LoaderOptions lo = loader_options(config_.data);
  lo.seed += static_cast<uint64_t>(rollbacks) * 0x9E3779B97F4A7C15ull;
  lo.sample_dtype = sample_dtype();
  lo.batch_memory = &batch_memory();
  lo.held = reads_ahead() ? 2 : 1;
  train_ahead_.reset();
  train_loader_.reset();  // its reader threads end before the new loader's start
  if (!reads_data()) return;
  train_loader_ = std::make_unique<DataLoader>(data_.train, lo, shard_comm());
  train_ahead_ = std::make_unique<BatchAhead>(*train_loader_, feed_.get());
}

// What the loaders decode samples into: the model's sample input's (a pipeline stage without it
// feeds no samples: float32).
DType TrainingRun::sample_dtype() const {
  return feeds_samples() ? loader_sample_dtype(*ex_, task_.model) : DType::f32;
}

// Where the loaders decode batches: the model memory's staging memory, page-locked for a GPU,
// whence a batch reaches the device at the link's speed.
MemoryResource& TrainingRun::batch_memory() const {
  return ex_->backend().memory().staging_memory();
}

// Whether this rank's model reads the samples (a pipeline's first stage does, its others not).
bool TrainingRun::feeds_samples() const {
  if (!pipeline_) return true;
  const std::vector<std::string>& inputs = pipeline_->stage_graph().data_inputs;
  return std::find(inputs.begin(), inputs.end(), task_.model.sample_input) != inputs.end();
}

RunFacts TrainingRun::facts() const {
  const int64_t batch = config_.data.batch_size;
  RunFacts f;
  f.config = &config_;
  f.ranks = comm_->size();
  f.local_ranks = comm_->local_size();
  f.nodes = (comm_->size() + comm_->local_size() - 1) / comm_->local_size();
  f.threads = threads_;
  f.backend = backend_->name();
  f.isa = backend_->instruction_sets();
  f.global_batch = batch * groups_.data_parallel;
  f.train_samples = train_steps_ * batch * groups_.data_parallel;
  f.eval_samples = valid_loader_ ? valid_loader_->plan().samples_per_epoch() : 0;  // rank 0's
  f.steps_per_epoch = train_steps_;
  f.parameter_count = summary_.parameter_count;
  f.train_flops_per_step = pipeline_ ? pipeline_->whole().executor().training_flops() *
                                           config_.dist.pipeline.micro_batches
                                     : ex_->training_flops();
  f.first_epoch = pos_.epoch;
  f.first_step = pos_.global_step;
  f.previous_epochs = &summary_.epochs;  // the checkpoint's history when resumed
  return f;
}

TrainSummary TrainingRun::run() {
  try {
    return train();
  } catch (const Error& e) {
    record_failure(e);
    throw;
  }
}

TrainSummary TrainingRun::train() {
  records_.notify([&](RunObserver& o) { o.init_start(config_); });
  compile();
  print_header();
  if (options_.dry_run) {
    print_dry_run();
    if (groups_.split) print_spatial_plan();
    return summary_;
  }
  open_data();
  // The report's per-layer table needs every op's time (a clock read around each op).
  ex_->set_profiling(config_.train.report);
  if (groups_.split) groups_.split->reset_halo_timing();
  // The position's shards are the data-parallel ones: a spatial group reads one.
  CheckpointContext cc{run_dir_.checkpoint_dir, comm_->rank() == 0, groups_.data_parallel,
                       config_.data.batch_size, train_steps_};
  if (!pipeline_)
    process_state_ = std::make_unique<ProcessSavedState>(*ex_, *optimizer_, comm_->rank() == 0);
  checkpointer_ = std::make_unique<Checkpointer>(config_, cc, saved_state(), scaler_, *log_);
  stop_rules_ = std::make_unique<StopRules>(task_, config_.train.early_stopping_patience);
  if (options_.resume) {
    resume_from(run_dir_);
    if (pos_.rollbacks > 0) open_train_loader(pos_.rollbacks);  // the order it had then
  }
  // From here on a stop signal ends the run cleanly with a checkpoint.
  signals_ = std::make_unique<StopSignals>(config_.train.stop_signals);
  budget_ = std::make_unique<TimeBudget>(config_.train, started_);
  if (budget_->enabled())
    *log_ << "time budget: " << budget_->source()
          << "; the run stops with a checkpoint while the measured step, checkpoint and "
             "validation times still fit\n";
  write_status(RunStatus{});
  RunFacts f = facts();
  f.control = &control_;
  records_.notify([&](RunObserver& o) { o.init_stop(f); });
  records_.notify([&](RunObserver& o) { o.run_start(f); });
  timeline_ = std::make_unique<Timeline>(
      *comm_, options_.timeline.empty() ? config_.dist.timeline : options_.timeline);
  epoch_log_ = std::make_unique<EpochLog>(*log_, config_.data.n_epochs);
  summary_.status = pos_.status.empty() ? "success" : pos_.status;
  if (pos_.epoch >= config_.data.n_epochs)
    *log_ << "nothing to do: the run has done " << pos_.epoch << " epochs and data.n_epochs is "
          << config_.data.n_epochs << " (raise it to train on)\n";
  for (int epoch = pos_.epoch; epoch < config_.data.n_epochs; ++epoch) {
    EpochStats st;
    try {
      if (train_epoch(epoch, st)) break;  // stopped mid-epoch
    } catch (const RollBack& back) {
      roll_back(back.checkpoint);
      epoch = pos_.epoch - 1;  // the loop's ++ enters the checkpoint's epoch
      continue;
    }
    if (finish_epoch(epoch, st)) break;
  }
  finish();
  return summary_;
}

// Returns whether the run stopped in the middle of the epoch (a stop signal, the time budget).
bool TrainingRun::train_epoch(int epoch, EpochStats& st) {
  st.epoch = epoch + 1;
  // The epoch's rate: the one of its last optimizer step (per-step schedules change within it).
  st.lr = lr_policy_->lr(schedule_step(), epoch);
  const auto t0 = Clock::now();
  records_.notify([&](RunObserver& o) { o.epoch_start(st.epoch); });
  // A resumed epoch continues where its checkpoint was taken.
  const int64_t first_step = epoch == pos_.epoch ? pos_.step_in_epoch : 0;
  if (train_loader_) train_loader_->start_epoch(epoch, first_step);
  if (sync_) sync_->reset_stats();
  // Post-local SGD: synchronous epochs first, then local windows.
  const TrainConfig& t = config_.train;
  const int local_steps =
      epoch >= t.local_sgd_start_epoch ? static_cast<int>(t.local_sgd_steps) : 1;
  if (step_) step_->set_local_steps(local_steps);
  // The lag from the first window that starts in its start epoch (TrainStep counts windows from
  // the run's start; a window open across the epoch's boundary stays synchronous).
  if (step_) {
    const int64_t k = t.gradient_accumulation_frequency;
    step_->set_lag_start_window((t.gradient_lag_start_epoch * train_steps_ + k - 1) / k);
  }
  if (pipeline_) pipeline_->step().set_lag_start_step(t.gradient_lag_start_epoch * train_steps_);
  if (pipeline_) pipeline_->step().set_local_steps(local_steps);
  double loss_sum = epoch == pos_.epoch ? pos_.epoch_loss_sum : 0;
  const int64_t overflow_steps_before = pos_.overflow_steps;
  // However the epoch's loop ends (a stop, a rollback, an error), no batch stays read ahead.
  struct DropAhead {
    std::unique_ptr<BatchAhead>& ahead;  // the member: a rollback makes a new one
    ~DropAhead() {
      if (ahead) ahead->drop();
    }
  } drop_ahead_at_exit{train_ahead_};
  for (int64_t s = first_step; s < train_steps_; ++s) {
    at_epoch_ = epoch;
    at_step_ = s;
    try {
      const double lr = lr_policy_->lr(schedule_step(), epoch);
      if (train_one_step(epoch, s, lr, loss_sum, t0)) st.lr = lr;
    } catch (const Error& e) {
      throw Error(e.kind(), "epoch " + std::to_string(epoch + 1) + ": " + e.what(), e.scope());
    }
    // The epoch's last step goes on to its validation and checkpoint (finish_epoch).
    if (stop_requested_ && s + 1 < train_steps_) {
      write_step_checkpoint(epoch, s + 1, loss_sum);
      stop_early(epoch, s + 1);
      return true;
    }
  }
  if (step_) {
    // An accumulation window open across the epoch's end: every rank the same partial sum, so
    // the epoch's checkpoint holds the job's state.
    step_->share_partial_sum(*comm_);
    // A local SGD window open at the epoch's end: the models are averaged now, in every run, so
    // validation and the epoch's checkpoint see the job's model.
    act_on_decision(epoch, train_steps_ - 1, step_->end_local_window());
  }
  if (pipeline_batches_)
    act_on_decision(epoch, train_steps_ - 1, pipeline_batches_->end_local_window());
  st.overflow_steps = pos_.overflow_steps - overflow_steps_before;  // the same on every rank
  st.loss_scale = scaler_ ? scaler_->scale() : 0;
  st.train_seconds = since(t0);
  reduce_epoch_figures(st, loss_sum, train_steps_ - first_step);
  if (data_.valid) validate_epoch(epoch, st);
  st.seconds = since(t0);
  return false;
}

// Returns whether the micro-batch ended with an optimizer step.
bool TrainingRun::train_one_step(int epoch, int64_t s, double lr, double& loss_sum,
                                 Clock::time_point t0) {
  const auto step_started = Clock::now();
  const double asked = Timeline::now();
  double got = 0;
  const std::optional<LoadedBatch> b = next_batch(got);
  read_ahead(s);
  got = Timeline::now();  // reading ahead is the data's time too
  // This rank's stop request rides with the step's gradients: every rank learns it together.
  const bool stop_here = StopSignals::received() != 0 || budget_->spent();
  const StepResult r =
      pipeline_ ? run_pipeline_step(lr, b ? &*b : nullptr, stop_here) : run_step(lr, stop_here);
  // The prediction is a marked output, alive through backward and the update: still the one this
  // micro-batch was trained on. (A pipeline's last stage sees only micro-batches.)
  if (s + 1 == train_steps_ && b && feed_)
    last_batch_->record(r.loss, feed_->host_prediction(), *b);
  if (b) train_ahead_->release(*b);
  act_on_decision(epoch, s, r);
  record_step(*timeline_, sync_, s + 1, asked, got, r);
  // A skipped step's loss counts as 0. The ranks of a spatial group share a sample: each adds
  // its share, so sums over all ranks count every sample once.
  if (std::isfinite(r.loss)) loss_sum += r.loss / ranks_per_loss();
  ++pos_.global_step;
  ++summary_.steps;
  ++profiled_steps_;
  budget_->step_done(since(step_started));
  // A step-counted checkpoint at the epoch's end waits for validation: it is the epoch's.
  if (checkpointer_->due_after_step(pos_.global_step) && s + 1 < train_steps_)
    write_step_checkpoint(epoch, s + 1, loss_sum);
  if (records_.observers.empty()) return r.updated;
  StepInfo si;
  si.epoch = epoch + 1;
  si.step_in_epoch = s + 1;
  si.steps_per_epoch = train_steps_;
  si.global_step = pos_.global_step;
  si.loss = r.loss;  // this rank's batch loss (the epoch figures are job-wide)
  si.loss_scale = r.loss_scale;
  si.epoch_elapsed_s = since(t0);
  records_.notify([&](RunObserver& o) { o.step_end(si); });
  return r.updated;
}

// The data-parallel step on the batch fed (next_batch), with the test faults asked for.
StepResult TrainingRun::run_step(double lr, bool stop_here) {
  inject_nonfinite_input_if_asked(*ex_, task_.model.sample_input, pos_.global_step + 1,
                                  comm_->rank());
  if (gradient_overflow_asked(pos_.global_step + 1, comm_->rank())) step_->overflow_next_gradient();
  return step_->run(lr, stop_here, rank_failure_.failed());
}

// The pipeline step on `batch` (null: this rank could not read it), with the test faults asked
// for.
StepResult TrainingRun::run_pipeline_step(double lr, const LoadedBatch* batch, bool stop_here) {
  if (batch) inject_nonfinite_sample_if_asked(*batch, pos_.global_step + 1, comm_->rank());
  if (gradient_overflow_asked(pos_.global_step + 1, comm_->rank()))
    pipeline_->step().overflow_next_gradient();
  return pipeline_batches_->train(lr, batch, stop_here, rank_failure_.failed());
}

// What the job decided about step `s`'s update (every rank alike): a rank's failure ends the run,
// non-finite values go to train.on_nonfinite, an overflow lowered the loss scale, a stop request
// ends the run after this step.
void TrainingRun::act_on_decision(int epoch, int64_t s, const StepResult& r) {
  if (r.decided && r.rank_failed)
    rank_failure_.throw_together(*comm_, "step " + std::to_string(s + 1));
  if (r.decided && !r.finite) on_nonfinite(epoch, s, r);  // returns only to skip the update
  if (r.overflow) on_overflow(r);
  stop_requested_ = stop_requested_ || r.stop_requested;
}

// The step's batch, fed to the executor. On more than one rank a batch this rank cannot read
// (a damaged file in its shard) does not end it alone: the failure is recorded, the step runs on
// stale inputs so the rank joins the gradient exchange, and every rank ends there together
// (RankFailure). A rank that failed reads nothing more: its loader may be broken.
// `got`: when the loader handed it over.
std::optional<LoadedBatch> TrainingRun::next_batch(double& got) {
  got = Timeline::now();
  if (rank_failure_.failed() || !train_loader_) return std::nullopt;
  std::optional<LoadedBatch> b;
  try {
    b = train_ahead_->take();
    got = Timeline::now();
    if (batch_failure_asked(pos_.global_step + 1, comm_->rank()))
      throw_input("test fault: the batch of global step " + std::to_string(pos_.global_step + 1) +
                  " could not be read (CREST_TEST_BATCH_FAILURE_AT_STEP)");
    if (feed_) feed_->feed(*b);  // a pipeline feeds each micro-batch as its schedule comes to it
  } catch (const std::exception& e) {
    if (comm_->size() == 1) throw;
    rank_failure_.record(e);
    if (b) train_ahead_->release(*b);
    return std::nullopt;
  }
  return b;
}

// Not past the epoch's end (the next epoch's order starts with its own start_epoch), and not for
// a pipeline (its stages feed micro-batches). A failure to read or stage the batch waits for its
// step, which handles it as next_batch handles one: on its own rank or job-wide.
void TrainingRun::read_ahead(int64_t s) {
  if (reads_ahead() && train_loader_ && !rank_failure_.failed() && s + 1 < train_steps_)
    train_ahead_->read();
}

// A pipeline's stages feed micro-batches themselves: nothing to stage.
bool TrainingRun::reads_ahead() const {
  if (pipeline_ || !feed_) return false;
  return read_ahead_asked().value_or(!ex_->backend().memory().is_host());
}

// TrainOptions::read_ahead, else the test hook; unset: on a device only.
std::optional<bool> TrainingRun::read_ahead_asked() const {
  return options_.read_ahead ? options_.read_ahead : read_ahead_forced();
}

// Job-wide figures: sums over the samples' shards (losses and counts), data wait and allreduce
// as the ranks' means.
void TrainingRun::reduce_epoch_figures(EpochStats& st, double loss_sum, int64_t steps_run) {
  const double ranks = comm_->size(), shards = groups_.data_parallel;
  const GradientSyncStats exchange = sync_ ? sync_->stats() : GradientSyncStats{};
  const LoaderStats loaded = train_loader_ ? train_loader_->stats() : LoaderStats{};
  double sums[4] = {loss_sum, loaded.wait_s, exchange.allreduce_s, exchange.finish_wait_s};
  comm_->allreduce_sum(sums, 4);
  int64_t counts[2] = {0, 0};
  if (counts_samples()) counts[0] = loaded.skipped, counts[1] = loaded.cache_hits;
  data_comm().allreduce_sum(counts, 2);
  // Mean over the whole epoch's steps (a resumed epoch brings its earlier steps' sum along).
  st.train_loss = sums[0] / (static_cast<double>(train_steps_) * shards);
  st.data_wait_s = sums[1] / ranks;
  st.allreduce_s = sums[2] / ranks;
  st.allreduce_exposed_s = sums[3] / ranks;
  st.skipped = counts[0];
  st.cache_hits = counts[1];
  st.samples_per_s =
      static_cast<double>(steps_run * config_.data.batch_size) * shards / st.train_seconds;
  last_batch_->reduce(data_comm(), st);
}

// The split layers' halo times since the last call (the training steps'), added to the run's.
void TrainingRun::bank_training_halo() {
  if (!groups_.split) return;
  for (const SpatialSplit::HaloLayer& l : groups_.split->halo_layers()) {
    SpatialSplit::HaloLayer& sum = training_halo_[l.layer];
    sum.layer = l.layer;
    sum.overlap = l.overlap;
    sum.exchanges += l.exchanges;
    sum.transfer_s += l.transfer_s;
    sum.exposed_s += l.exposed_s;
  }
  groups_.split->reset_halo_timing();
}

void TrainingRun::validate_epoch(int epoch, EpochStats& st) {
  records_.notify([&](RunObserver& o) { o.eval_start(st); });
  ex_->set_profiling(false);  // the report's per-layer times are per training step
  bank_training_halo();
  // As the DeepCAM reference: every rank validates with the running statistics of all ranks
  // (a pipeline stage: of all its replicas).
  average_eval_stats(ex_->params(), pipeline_ ? pipeline_->replicas() : *comm_);
  const auto t0 = Clock::now();
  const ValidationResult v =
      pipeline_ ? pipeline_batches_->validate(valid_loader_.get(), valid_batches_, *scoring_,
                                              data_comm(), epoch)
                : validate(*ex_, *feed_, *valid_loader_, *scoring_, data_comm(), epoch);
  budget_->validation_done(since(t0));
  if (groups_.split) groups_.split->reset_halo_timing();  // validation's exchanges are not counted
  ex_->set_profiling(config_.train.report);
  st.val_loss = v.loss;
  st.val_metrics = v.metrics;
  st.skipped += v.skipped;
  st.validated = true;
  records_.notify([&](RunObserver& o) { o.eval_stop(st); });
}

// Records the epoch, applies the stop rules, then writes the epoch's checkpoint (which records
// the early-stopping state). Returns whether the run stops.
bool TrainingRun::finish_epoch(int epoch, EpochStats& st) {
  summary_.epochs.push_back(st);
  records_.notify([&](RunObserver& o) { o.epoch_stop(st); });
  epoch_log_->epoch(st);
  const ObserverRequests asked = agree_observer_requests();
  StopDecision d = stop_rules_->after_epoch(st, pos_);
  if (!d.stop && asked.stop)
    d = {true, stop_rules_->status_after_last_epoch(),
         "stopped on an observer's request: " + control_.stop_reason()};
  if (d.stop) {
    *log_ << d.message << "\n";
    summary_.status = d.status;
    if (asked.stop) summary_.stop_reason = control_.stop_reason();
  }
  const bool last = d.stop || epoch + 1 == config_.data.n_epochs;
  if (last && !d.stop) summary_.status = stop_rules_->status_after_last_epoch();
  // A stop request on the epoch's last step: the epoch is complete, the run stops after it
  // (unless it ends here anyway).
  const bool stop_early_here = stop_requested_ && !last;
  const bool step_due = checkpointer_->due_after_step(pos_.global_step);
  if (last || stop_early_here || step_due || asked.checkpoint ||
      checkpointer_->due_after_epoch(epoch)) {
    TrainingPosition at = pos_;
    at.epoch = epoch + 1;
    at.step_in_epoch = 0;
    at.epoch_loss_sum = 0;
    at.status = last ? summary_.status : "";
    write_checkpoint_at(at);
  }
  at_epoch_ = epoch + 1;
  at_step_ = 0;
  if (stop_early_here) stop_early(epoch + 1, 0);
  return d.stop || stop_early_here;
}

// A step whose loss (on some rank) or averaged gradients were not finite; its update was not
// applied. train.on_nonfinite says what follows: stop (an error naming the step, the first bad
// gradient and the last good checkpoint, which is kept), skip (go on), or rollback.
void TrainingRun::on_nonfinite(int epoch, int64_t s, const StepResult& r) {
  // Post-mortem, in the whole model's order (a pipeline's stages agree on it).
  TrainStep::NonFiniteGradients bad;
  if (pipeline_batches_)
    bad = pipeline_batches_->find_nonfinite_gradients();
  else if (step_)
    bad = step_->find_nonfinite_gradients();
  const Executor& whole = pipeline_ ? pipeline_->whole().executor() : *ex_;
  std::ostringstream what;
  // The epoch is named by the caller's context ("epoch 2: ...") when this ends the run.
  what << "non-finite values at step " << s + 1 << " of epoch " << epoch + 1 << " (global step "
       << pos_.global_step + 1 << "): ";
  if (r.nonfinite_loss) what << "the loss was not finite on at least one rank; ";
  if (bad.count > 0)
    what << "first non-finite gradient: " << bad.first << " (" << bad.count << " of "
         << whole.params().slots().size() << " tensors)";
  else if (step_ || pipeline_batches_)
    what << "every gradient is finite";
  else
    what << "the whole model's gradient norm was not finite";
  // Under loss scaling only an overflow at the smallest scale comes here (else it is skipped).
  if (bad.count > 0 && scaler_ && !r.nonfinite_loss)
    what << " at loss scale " << loss_scale_text(r.loss_scale)
         << ", the smallest (not an overflow that loss scaling can cure)";
  const NonFinitePolicy policy = config_.train.on_nonfinite;
  if (policy == NonFinitePolicy::skip) {
    ++summary_.skipped_updates;
    *log_ << what.str() << "; update skipped (" << summary_.skipped_updates
          << " so far; train.on_nonfinite: skip)\n";
    return;
  }
  std::string newest;  // rank 0 sees the run directory; every rank must decide alike
  if (comm_->rank() == 0 && !run_dir_.checkpoint_dir.empty()) {
    const auto existing = list_checkpoints(run_dir_.checkpoint_dir);
    if (!existing.empty()) newest = existing.back();
  }
  broadcast_text(*comm_, newest);
  if (policy == NonFinitePolicy::rollback && !newest.empty() &&
      pos_.rollbacks < config_.train.max_rollbacks) {
    *log_ << what.str() << "; rolling back to " << newest << "\n";
    throw RollBack{newest};
  }
  what << "; the update was not applied. ";
  if (policy == NonFinitePolicy::rollback)
    what << (newest.empty()
                 ? "No checkpoint to roll back to. "
                 : "train.max_rollbacks (" + std::to_string(config_.train.max_rollbacks) +
                       ") rollbacks done. ");
  if (newest.empty())
    what << "No checkpoint was written yet.";
  else
    what << "The last good checkpoint is " << newest
         << " (kept): resume with `crest train --resume " << config_.output_dir
         << "` after lowering the learning rate";
  what << " (train.on_nonfinite: stop | skip | rollback chooses what happens)";
  summary_.status = "aborted";
  throw Error(ErrorKind::runtime, what.str(),
              comm_->rank() == 0 ? Error::Scope::every_rank_printed_here
                                 : Error::Scope::every_rank_printed_elsewhere);
}

// Loss scaling met a gradient overflow (every rank alike): TrainStep skipped the update and
// lowered the scale. Expected now and then (more often while the first steps find the scale), so
// the run goes on; Apex prints the same line.
void TrainingRun::on_overflow(const StepResult& r) {
  ++pos_.overflow_steps;
  ++summary_.overflow_steps;
  *log_ << "global step " << pos_.global_step + 1 << ": gradient overflow at loss scale "
        << loss_scale_text(r.loss_scale) << "; update skipped, loss scale now "
        << loss_scale_text(scaler_->scale()) << "\n";
}

// Where the learning-rate schedule stands: the optimizer steps taken plus those loss scaling
// skipped. As with torch.amp.GradScaler, whose skipped optimizer.step() leaves the optimizer's
// own step count (Adam's bias correction) alone while the training loop still calls
// scheduler.step(): an overflow does not delay the schedule (a few early overflows would shift
// every later milestone). Steps train.on_nonfinite: skip leaves out are not counted, as before.
int64_t TrainingRun::schedule_step() const {
  return optimizer_->steps_taken() + pos_.overflow_steps;
}

// Back to `checkpoint` (every rank: rank 0 reads it), with the next data order.
void TrainingRun::roll_back(const std::string& checkpoint) {
  RunDirectory from = run_dir_;
  if (comm_->rank() == 0) {
    from.resume_from = checkpoint;
    from.resume_info = read_checkpoint_info(checkpoint);
  }
  const int rollbacks = pos_.rollbacks + 1;
  settle_lagged_gradients();  // a lagged gradient in flight is overwritten by the checkpoint's
  resume_from(from);
  pos_.rollbacks = std::max(pos_.rollbacks, rollbacks);
  open_train_loader(pos_.rollbacks);
  stop_requested_ = false;
  last_checkpoint_step_ = pos_.global_step;
  *log_ << "rolled back to epoch " << pos_.epoch + 1 << ", step " << pos_.step_in_epoch
        << " (rollback " << pos_.rollbacks << " of at most " << config_.train.max_rollbacks
        << "); the data order now follows another seed\n";
}

// Every rank takes the checkpoint's state (rank 0 reads it) and position.
void TrainingRun::resume_from(const RunDirectory& from) {
  if (pipeline_) {
    pos_ = resume_pipeline_from_checkpoint(from, config_, *comm_, *pipeline_, train_steps_,
                                           summary_.epochs);
    return;
  }
  pos_ = resume_from_checkpoint(from, config_, *comm_, groups_.data_parallel, *sync_, *ex_,
                                *optimizer_, scaler_, train_steps_, summary_.epochs);
  step_->set_micro_batches(pos_.global_step);  // the place in the accumulation window
}

void TrainingRun::write_checkpoint_at(const TrainingPosition& at) {
  const auto t0 = Clock::now();
  // Rank 0 writes; its failure (train.checkpoint_failures: stop) must not leave the other ranks
  // in the next step's exchange: one flag's maximum per checkpoint tells them.
  RankFailure failure;
  settle_lagged_gradients();  // the lagged gradient in the checkpoint is the job's average
  // Local SGD: checkpoints fall where the models were averaged (config rule, epoch ends).
  CREST_CHECK(!(step_ && step_->local_window_open()) &&
                  !(pipeline_ && pipeline_->step().local_window_open()),
              "a checkpoint inside a local SGD window");
  try {
    checkpointer_->write(at, summary_.epochs);
  } catch (const std::exception& e) {
    if (comm_->size() == 1) throw;
    failure.record(e);
  }
  if (comm_->size() > 1)
    failure.check_together(*comm_,
                           "the checkpoint of global step " + std::to_string(at.global_step));
  budget_->checkpoint_done(since(t0));
  last_checkpoint_step_ = at.global_step;
}

// A checkpoint between two steps of `epoch`, after `steps_done` of them.
void TrainingRun::write_step_checkpoint(int epoch, int64_t steps_done, double loss_sum) {
  if (last_checkpoint_step_ == pos_.global_step) return;  // written already
  double job_sum = loss_sum;  // the epoch's loss so far, summed over the samples' shards
  comm_->allreduce_sum(&job_sum, 1);
  TrainingPosition at = pos_;
  at.epoch = epoch;
  at.step_in_epoch = steps_done;
  at.epoch_loss_sum = job_sum;
  at.status = "";
  write_checkpoint_at(at);
}

// What rank 0's observers asked for during the epoch, known to every rank: one small collective
// per epoch (only rank 0 has observers, so the maximum is its requests). The checkpoint request
// is consumed; a stop request ends the run anyway.
TrainingRun::ObserverRequests TrainingRun::agree_observer_requests() {
  const double mine =
      (control_.stop_requested() ? 1 : 0) + (control_.checkpoint_requested() ? 2 : 0);
  const auto both = static_cast<int>(comm_->allreduce_max(mine));
  control_.clear_checkpoint_request();
  return {.stop = (both & 1) != 0, .checkpoint = (both & 2) != 0};
}

// The run stops before its end, its checkpoint written: says why and how to go on, and sets the
// exit code (128 + the signal's number; 75, EX_TEMPFAIL, for the time budget). `epoch` is
// 0-based, `steps_done` the steps of it done (0: at the epoch's start).
void TrainingRun::stop_early(int epoch, int64_t steps_done) {
  // Why, from whichever rank asked: two small collectives, once per run.
  const int signal = static_cast<int>(comm_->allreduce_max(StopSignals::received()));
  const double left_s = -comm_->allreduce_max(-budget_->left_s());  // the least any rank has
  std::ostringstream why;
  if (signal != 0) {
    why << signal_name(signal);
    summary_.exit_code = 128 + signal;
  } else {
    why << std::fixed << std::setprecision(1) << std::max(0.0, left_s) / 60
        << " minutes of budget left";
    summary_.exit_code = 75;
  }
  summary_.status = "preempted";
  summary_.stop_reason = why.str();
  at_epoch_ = epoch;
  at_step_ = steps_done;
  *log_ << "stopping at epoch " << epoch + 1 << ", step " << steps_done << ": " << why.str()
        << "; checkpoint " << checkpointer_->last() << "; resume with `crest train --resume "
        << config_.output_dir << "`\n";
}

void TrainingRun::settle_lagged_gradients() {
  if (step_) step_->settle();
  if (pipeline_) pipeline_->step().settle();
}

void TrainingRun::finish() {
  settle_lagged_gradients();  // no allreduce left in flight
  // The weights first: they are the run's result, the timeline only describes it. A run that
  // stopped early has no result yet: its checkpoint is what goes on.
  const bool preempted = summary_.status == "preempted";
  if (preempted && !options_.save_weights.empty())
    *log_ << "weights not saved to " << options_.save_weights
          << ": the run stopped early (resume it to finish)\n";
  if (!preempted && !options_.save_weights.empty()) {
    // Every rank is here: rank 0 writes what it holds and what the others send it (a spatially
    // split dense head's parts, a pipeline's stages).
    SavedState& saved = saved_state();
    saved.provide(/*with_optimizer=*/false, [&](const checkpoint_file::StateBytes& bytes) {
      save_weights(saved.layout(), options_.save_weights,
                   {{"format", "crest weights"}, {"model", task_.name}, {"config", config_.source}},
                   task_.model.external_params, bytes);
      *log_ << "weights saved to " << options_.save_weights << "\n";
    });
  }
  timeline_->write(*comm_);
  if (timeline_->enabled())
    *log_ << "timeline written to "
          << (options_.timeline.empty() ? config_.dist.timeline : options_.timeline) << "\n";
  summary_.last_checkpoint = checkpointer_->last();
  // The run's final state was not saved (a tolerated failure at the end): the run's result is
  // not where a resume would start, so the job must not look successful.
  if (checkpointer_->last_failed() && comm_->rank() == 0) {
    *log_ << "the final checkpoint could not be written; the newest valid one is "
          << checkpointer_->newest_valid() << "\n";
    if (summary_.exit_code == 0) summary_.exit_code = 1;
  }
  if (config_.train.report) {
    records_.notify([&](RunObserver& o) { o.layer_profile(ex_->profile(), profiled_steps_); });
    bank_training_halo();
    std::vector<SpatialSplit::HaloLayer> halo;
    for (auto& [name, l] : training_halo_) {
      l.hidden_fraction = HaloTiming{l.exchanges, l.transfer_s, l.exposed_s}.hidden_fraction();
      halo.push_back(l);
    }
    records_.notify([&](RunObserver& o) { o.halo_profile(halo); });
  }
  records_.notify([&](RunObserver& o) { o.run_stop(summary_); });
  epoch_log_->done(summary_, since(started_));
  RunStatus st;
  st.state = preempted ? "preempted" : "finished";
  st.status = preempted ? "" : summary_.status;
  st.reason = summary_.stop_reason;
  st.resumable = preempted;
  st.exit_code = summary_.exit_code;
  write_status(st);
}

// output_dir/status.json (rank 0), with the run's position and newest checkpoint filled in.
void TrainingRun::write_status(RunStatus st) {
  if (comm_->rank() != 0 || run_dir_.checkpoint_dir.empty()) return;
  st.epochs_done = at_epoch_;
  st.step_in_epoch = at_step_;
  st.global_step = pos_.global_step;
  st.loss_scale = scaler_ ? scaler_->scale() : 0;
  st.overflow_steps = pos_.overflow_steps;
  const auto existing = list_checkpoints(run_dir_.checkpoint_dir);
  st.checkpoint = existing.empty() ? "" : existing.back();
  if (st.state != "finished" && !st.checkpoint.empty()) {
    st.resumable = true;
    st.resume = "crest train --resume " + config_.output_dir;
  }
  write_run_status(config_.output_dir, st);
}

// An error ends the run: status.json says so (best effort: the error itself matters more).
void TrainingRun::record_failure(const Error& e) {
  try {
    RunStatus st;
    st.state = "failed";
    st.reason = e.what();
    st.exit_code = e.exit_code();
    write_status(st);
  } catch (...) {
  }
}

}  // namespace

LrSchedule lr_schedule_of(const LrScheduleConfig& c) {
  LrSchedule s;
  s.base_lr = c.base_lr;
  s.scaling = c.scaling == LrScaling::linear ? LrSchedule::linear
              : c.scaling == LrScaling::sqrt ? LrSchedule::sqrt
                                             : LrSchedule::none;
  s.base_batch_size = c.base_batch_size > 0 ? c.base_batch_size : 1;
  s.n_warmup_epochs = c.n_warmup_epochs;
  s.decay_schedule = c.decay_schedule;
  s.validate();
  return s;
}

int64_t effective_batch(const Config& c, int ranks) {
  return c.data.batch_size * ranks * c.train.gradient_accumulation_frequency;
}

std::unique_ptr<LrPolicy> lr_policy_of(const LrScheduleConfig& c, int64_t global_batch) {
  if (c.per_step) return make_step_lr_policy(step_lr_schedule_of(c));
  return make_epoch_lr_policy(lr_schedule_of(c), global_batch);
}

StepLrSchedule step_lr_schedule_of(const LrScheduleConfig& c) {
  StepLrSchedule s;
  s.type = c.type;
  s.start_lr = c.start_lr;
  s.milestones = c.milestones;
  s.decay_rate = c.decay_rate;
  s.closed_form = c.closed_form;
  s.t_max = c.t_max;
  s.eta_min = c.eta_min;
  s.decay_steps = c.decay_steps;
  s.end_lr = c.end_lr;
  s.power = c.power;
  s.warmup_steps = c.lr_warmup_steps;
  s.warmup_factor = c.lr_warmup_factor;
  s.validate();
  return s;
}

std::optional<double> EpochStats::val_metric(const std::string& short_name) const {
  for (const MetricValue& m : val_metrics)
    if (m.name == short_name) return m.value;
  return std::nullopt;
}

std::optional<double> EpochStats::last_batch_metric(const std::string& short_name) const {
  for (const MetricValue& m : last_batch_metrics)
    if (m.name == short_name) return m.value;
  return std::nullopt;
}

TrainSummary run_training(const Config& config, const TrainOptions& options, std::ostream& log) {
  TrainingRun run(config, options, log);
  return run.run();
}

MemoryLimit memory_limit_per_rank(const Config& config, int local_ranks) {
  if (config.crest.max_memory_gb > 0)
    return {static_cast<size_t>(config.crest.max_memory_gb * double(1ull << 30)),
            "crest.max_memory_gb " + (std::ostringstream() << config.crest.max_memory_gb).str(),
            true};
  const NodeMemory node = available_node_memory();
  if (node.bytes == 0) return {};
  return {node.bytes / static_cast<size_t>(std::max(1, local_ranks)),
          "this rank's share of the node's memory (" + node.source + " " +
              human_bytes(static_cast<double>(node.bytes)) + " over " +
              std::to_string(local_ranks) + " ranks; crest.max_memory_gb sets another)"};
}

int compute_threads_per_rank(const Config& config, int local_ranks) {
  if (config.crest.threads > 0) return config.crest.threads;
  return default_threads_per_rank(local_ranks);
}

}  // namespace crest
