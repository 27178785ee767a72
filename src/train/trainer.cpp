#include "crest/train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <thread>

#include "crest/core/error.hpp"
#include "crest/core/units.hpp"
#include "crest/data/loader.hpp"
#include "crest/dist/communicator.hpp"
#include "crest/dist/gradient_sync.hpp"
#include "crest/dist/timeline.hpp"
#include "crest/optim/lr_schedule.hpp"
#include "crest/optim/optimizer.hpp"
#include "crest/train/checkpoint.hpp"
#include "crest/train/observers.hpp"
#include "crest/train/run_directory.hpp"
#include "crest/train/train_step.hpp"
#include "crest/train/training_data.hpp"
#include "crest/train/weights.hpp"

namespace crest {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& o) {
  switch (o.name) {
    case OptimizerKind::sgd:
      if (o.nesterov) throw_input("optimizer.nesterov: Nesterov momentum is not supported yet");
      return std::make_unique<SgdKeras>(o.momentum);
    case OptimizerKind::adam:
      return std::make_unique<Adam>(o.beta1, o.beta2, o.eps, o.weight_decay, false);
    case OptimizerKind::adamw:
      return std::make_unique<Adam>(o.beta1, o.beta2, o.eps, o.weight_decay, true);
  }
  throw_input("optimizer.name: unsupported optimizer");
}

// Element i of a float32 or float64 tensor: the prediction is in the compile dtype, the loader's
// targets always float32.
double element(const TensorView& t, size_t i) {
  return t.dtype() == DType::f64 ? t.as<double>()[i] : static_cast<double>(t.as<float>()[i]);
}

double mean_abs_error(const TensorView& pred, const TensorView& y) {
  double s = 0;
  const auto n = static_cast<size_t>(y.numel());
  for (size_t i = 0; i < n; ++i) s += std::abs(element(pred, i) - element(y, i));
  return s / static_cast<double>(n);
}

// A float32 batch into a float64 input (crest.precision: float64), element by element.
void widen_into(const TensorView& from, const TensorView& to) {
  const auto n = static_cast<size_t>(from.numel());
  for (size_t i = 0; i < n; ++i) to.as<double>()[i] = static_cast<double>(from.as<float>()[i]);
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

TrainSummary run_training(const Config& config, const TrainOptions& options,
                          std::ostream& all_ranks_log) {
  const auto t_start = Clock::now();
  WorldOptions wo;
  wo.backend = config.dist.backend;
  wo.timeout_s = config.dist.timeout_s;
  auto comm = make_world_communicator(wo);
  // Before anything slow: the run directory must be usable (and a resume possible).
  const RunDirectory run_dir =
      options.dry_run ? RunDirectory{}
                      : prepare_run_directory(config, options.resume, options.overwrite, *comm);
  // Rank 0 speaks for the job, also into output_dir/train.log; the others stay quiet (their
  // errors still reach stderr).
  std::ostream discard(nullptr);
  std::unique_ptr<RunLog> run_log;
  // The run's records (rank 0 only; every figure they get is job-wide).
  std::vector<std::unique_ptr<RunObserver>> owned_observers;
  std::vector<RunObserver*> observers;
  std::string problem;  // rank 0's, shared so every rank stops with it
  if (comm->rank() == 0) {
    try {
      run_log = std::make_unique<RunLog>(
          all_ranks_log, run_dir.checkpoint_dir.empty() ? "" : config.output_dir + "/train.log",
          options.resume);
      if (run_dir.resume_info)
        run_log->stream() << "resuming " << config.output_dir << " from " << run_dir.resume_from
                          << " (epoch " << run_dir.resume_info->position.epoch + 1 << ", step "
                          << run_dir.resume_info->position.step_in_epoch << " of it; "
                          << run_dir.resume_info->position.global_step << " steps done)\n";
      if (!options.dry_run)
        owned_observers = make_run_observers(config, run_log->stream(), options.resume);
    } catch (const Error& e) {
      problem = e.what();
    }
  }
  fail_with_rank0(*comm, problem);
  std::ostream& log = comm->rank() == 0 ? run_log->stream() : discard;
  for (auto& o : owned_observers) observers.push_back(o.get());
  if (comm->rank() == 0)
    observers.insert(observers.end(), options.extra_observers.begin(),
                     options.extra_observers.end());
  auto notify = [&observers](auto&& call) {
    for (RunObserver* o : observers) call(*o);
  };
  notify([&](RunObserver& o) { o.init_start(config); });
  auto backend = make_backend(config.crest.backend);
  // Default: this node's cores shared among the ranks on it. Reported is what the backend really
  // uses (the reference backend: one thread, whatever was asked).
  const int threads = backend->set_threads(
      config.crest.threads > 0
          ? config.crest.threads
          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency() /
                                              static_cast<unsigned>(comm->local_size()))));

  const BuiltModel model = build_model(config.model);
  CompileOptions co;
  co.batch = config.data.batch_size;
  co.seed = config.data.seed;
  co.dtype = precision_dtype(config.crest.precision);
  const auto t_compile = Clock::now();
  Executor ex(model.graph, *backend, co);
  const double compile_s = since(t_compile);
  auto optimizer = make_optimizer(config.optimizer);
  optimizer->attach(ex.params(), ex.vec());
  const LrSchedule schedule = lr_schedule_of(config.lr_schedule);
  if (!options.init_weights.empty()) load_weights(ex.params(), options.init_weights);
  // Data parallelism: the same layout everywhere (verified), rank 0's weights everywhere, and
  // gradient buckets averaged while backward runs.
  GradientSync sync(*comm, ex.params(), ex.gradient_ready_order(), config.dist.first_bucket_mb,
                    config.dist.bucket_mb, parse_gradient_compression(config.dist.compress));
  sync.verify_same_layout_everywhere();
  sync.broadcast_parameters(ex.params());
  TrainStep step_runner(ex, *optimizer, &sync);

  TrainSummary summary;
  summary.parameter_count = ex.params().parameter_count();
  const size_t state_bytes = ex.params().trainable_bytes() * optimizer->state().size();
  summary.planned_bytes =
      ex.plan().arena_bytes + ex.plan().scratch_bytes + 2 * ex.params().bytes() + state_bytes;

  log << "crest " << CREST_VERSION << " | config " << config.source << " | backend "
      << backend->name() << " | " << threads << " threads";
  if (comm->size() > 1)
    log << " per rank | " << comm->size() << " ranks (" << comm->name() << ", "
        << comm->local_size() << " on this node) | batch " << config.data.batch_size
        << " per rank, " << config.data.batch_size * comm->size() << " global | "
        << sync.buckets().size() << " gradient buckets\n";
  else
    log << " | batch " << config.data.batch_size << "\n";
  if (backend->name() == "reference")
    log << "warning: crest.backend=reference: the reference kernels are plain single-threaded "
           "loops, a correctness oracle for tests; training runs about 100x slower than with "
           "crest.backend=onednn (the default)\n";
  if (options.dry_run) {
    log << ex.summary();
    log << "total parameters: " << with_thousands(summary.parameter_count) << "\n";
    log << "planned memory: " << human_bytes(static_cast<double>(summary.planned_bytes))
        << " (activations " << human_bytes(static_cast<double>(ex.plan().arena_bytes))
        << ", scratch " << human_bytes(static_cast<double>(ex.plan().scratch_bytes))
        << ", parameters+gradients " << human_bytes(2.0 * static_cast<double>(ex.params().bytes()))
        << ", optimizer state " << human_bytes(static_cast<double>(state_bytes)) << ")\n";
    log << "compiled in " << std::fixed << std::setprecision(2) << compile_s
        << " s; dry run: no data read, nothing written\n";
    return summary;
  }

  const int64_t batch = config.data.batch_size;
  const DataConfig& dc = config.data;
  if (!dc.stage_dir.empty()) notify([](RunObserver& o) { o.staging_start(); });
  const TrainingData data = open_training_data(config, *comm, log);
  if (!dc.stage_dir.empty()) notify([&](RunObserver& o) { o.staging_stop(data.stage_s); });
  summary.stage_s = data.stage_s;
  const std::shared_ptr<SampleSource>& train_src = data.train;
  const std::shared_ptr<SampleSource>& valid_src = data.valid;
  const LoaderOptions lo = loader_options(dc);
  DataLoader train_loader(train_src, lo, *comm);
  log << "train data: " << train_src->format() << ", " << train_loader.plan().describe() << " ("
      << train_loader.threads() << " reader threads, " << dc.prefetch << " batches ahead)\n";
  std::unique_ptr<DataLoader> valid_loader;
  if (valid_src) {
    LoaderOptions vo = lo;
    vo.shuffle = dc.shuffle_valid;
    vo.cache_bytes = 0;  // the cache bound is the training shard's
    valid_loader = std::make_unique<DataLoader>(valid_src, vo, *comm);
    log << "validation data: " << valid_loader->plan().describe() << "\n";
  }
  const int64_t train_steps = train_loader.plan().batches;
  RunFacts facts;
  facts.config = &config;
  facts.ranks = comm->size();
  facts.local_ranks = comm->local_size();
  facts.nodes = (comm->size() + comm->local_size() - 1) / comm->local_size();
  facts.threads = threads;
  facts.backend = backend->name();
  facts.global_batch = batch * comm->size();
  facts.train_samples = train_steps * batch * comm->size();
  facts.eval_samples = valid_loader ? valid_loader->plan().batches * batch * comm->size() : 0;
  facts.steps_per_epoch = train_steps;
  facts.parameter_count = summary.parameter_count;
  facts.train_flops_per_step = ex.training_flops();
  // The report's per-layer table needs every op's time (a clock read around each op).
  ex.set_profiling(config.train.report);
  int64_t profiled_steps = 0;

  // Resume: rank 0 loads the checkpoint (everything verified before anything is changed), then
  // every rank takes rank 0's weights, optimizer state and position.
  TrainingPosition pos;
  if (options.resume) {
    // (`problem` is empty here: the set-up's was thrown above.)
    if (comm->rank() == 0) {
      try {
        problem = resume_position_problem(*run_dir.resume_info, config, comm->size(), train_steps);
        if (problem.empty()) {
          const CheckpointInfo info = read_checkpoint(run_dir.resume_from, ex.params(), *optimizer);
          pos = info.position;
          summary.epochs = info.history;
        } else {
          problem = run_dir.resume_from + ": " + problem;
        }
      } catch (const Error& e) {
        problem = e.what();
      }
    }
    fail_with_rank0(*comm, problem);
    sync.broadcast_parameters(ex.params());
    for (auto& [name, buffer] : optimizer->state())
      comm->broadcast(buffer->data(), buffer->bytes(), 0);
    struct {
      int64_t epoch, step_in_epoch, global_step, optimizer_steps, since_best;
      uint64_t executor_steps;
      double epoch_loss_sum, best_val_loss;
    } p{pos.epoch,           pos.step_in_epoch,     pos.global_step,
        pos.optimizer_steps, pos.epochs_since_best, pos.executor_steps,
        pos.epoch_loss_sum,  pos.best_val_loss};
    comm->broadcast(&p, sizeof p, 0);
    pos.epoch = static_cast<int>(p.epoch);
    pos.step_in_epoch = p.step_in_epoch;
    pos.global_step = p.global_step;
    pos.optimizer_steps = p.optimizer_steps;
    pos.epochs_since_best = static_cast<int>(p.since_best);
    pos.executor_steps = p.executor_steps;
    pos.epoch_loss_sum = comm->rank() == 0 ? p.epoch_loss_sum : 0;  // saved as the job's sum
    pos.best_val_loss = p.best_val_loss;
    optimizer->set_steps_taken(pos.optimizer_steps);
    ex.set_training_steps(pos.executor_steps);
  }
  facts.first_epoch = pos.epoch;
  facts.first_step = pos.global_step;
  facts.previous_epochs = &summary.epochs;  // the checkpoint's history when resumed
  notify([&](RunObserver& o) { o.init_stop(facts); });
  notify([&](RunObserver& o) { o.run_start(facts); });

  TensorView pred = ex.output(model.prediction);
  // Reads a loaded batch in place when the graph allows it, else copies it into the inputs.
  // A float64 program (crest.precision) cannot read the float32 batch in place: it is widened.
  auto feed = [&](const LoadedBatch& b) {
    for (const auto& [name, view] :
         {std::pair<const char*, const TensorView*>{"x", &b.x}, {"y", &b.y}}) {
      const TensorView in = ex.input(name);
      if (in.dtype() != view->dtype())
        widen_into(*view, in);
      else if (!ex.bind_input(name, view->data()))
        std::memcpy(in.data(), view->data(), view->bytes());
    }
  };
  Timeline timeline(*comm, options.timeline.empty() ? config.dist.timeline : options.timeline);
  // One training step, recorded on the timeline when there is one.
  auto train_step = [&](DataLoader& loader, double lr, int64_t step) {
    const double t0 = Timeline::now();
    const LoadedBatch b = loader.next();
    const double t1 = Timeline::now();
    feed(b);
    const StepResult r = step_runner.run(lr);
    const double loss = r.loss;
    if (!r.finite)
      throw_runtime("the training loss became " + std::to_string(loss) + " at step " +
                    std::to_string(step + 1) + " of the epoch (learning rate too high?)");
    const double t2 = r.forward_done, t3 = r.backward_done, t4 = r.gradients_done;
    loader.release(b);
    if (timeline.enabled()) {
      const double t5 = r.update_done;
      const std::string args = "{\"step\":" + std::to_string(step + 1) + "}";
      timeline.span("data wait", Timeline::compute, t0, t1, args);
      timeline.span("forward", Timeline::compute, t1, t2, args);
      timeline.span("backward", Timeline::compute, t2, t3, args);
      if (comm->size() > 1) timeline.span("gradient wait", Timeline::compute, t3, t4, args);
      timeline.span("optimizer", Timeline::compute, t4, t5, args);
      const auto& timing = sync.last_step_timing();
      for (size_t k = 0; k < timing.size(); ++k) {
        const std::string bucket =
            "bucket " + std::to_string(k + 1) + "/" + std::to_string(timing.size());
        const std::string bargs = "{\"step\":" + std::to_string(step + 1) +
                                  ",\"bytes\":" + std::to_string(sync.buckets()[k].bytes()) + "}";
        timeline.span(bucket + " queued", Timeline::communication, timing[k].queued,
                      timing[k].started, bargs);
        timeline.span("allreduce " + bucket, Timeline::communication, timing[k].started,
                      timing[k].done, bargs);
      }
    }
    return loss;
  };
  // Checkpoints: the state between two steps, written by rank 0 (every rank holds the same).
  const TrainConfig& tc = config.train;
  auto checkpoint = [&](int epoch, int64_t step_in_epoch, double job_loss_sum,
                        const std::string& status) {
    if (run_dir.checkpoint_dir.empty() || comm->rank() != 0) return;
    CheckpointInfo info;
    info.position = pos;
    info.position.epoch = epoch;
    info.position.step_in_epoch = step_in_epoch;
    info.position.global_step = pos.global_step;
    info.position.executor_steps = ex.training_steps();
    info.position.optimizer_steps = optimizer->steps_taken();
    info.position.epoch_loss_sum = job_loss_sum;
    info.position.status = status;
    info.history = summary.epochs;
    info.ranks = comm->size();
    info.batch_size = batch;
    info.steps_per_epoch = train_steps;
    info.optimizer = optimizer->name();
    info.config_yaml = config.resolved_yaml;
    info.crest_version = CREST_VERSION;
    const auto t0 = Clock::now();
    summary.last_checkpoint =
        write_checkpoint(run_dir.checkpoint_dir, info, ex.params(), *optimizer, tc.checkpoint_keep);
    // Its size and time: what checkpointing costs the run (fsync included).
    std::error_code ec;
    const auto bytes = std::filesystem::file_size(summary.last_checkpoint, ec);
    log << "checkpoint: " << summary.last_checkpoint << " ("
        << human_bytes(static_cast<double>(ec ? 0 : bytes)) << ", " << std::fixed
        << std::setprecision(2) << since(t0) << " s)\n";
  };
  double run_epoch_s = 0;  // epochs of this invocation, for the ETA
  int run_epochs = 0;
  summary.status = pos.status.empty() ? "success" : pos.status;
  if (pos.epoch >= config.data.n_epochs)
    log << "nothing to do: the run has done " << pos.epoch << " epochs and data.n_epochs is "
        << config.data.n_epochs << " (raise it to train on)\n";
  for (int epoch = pos.epoch; epoch < config.data.n_epochs; ++epoch) {
    EpochStats st;
    st.epoch = epoch + 1;
    st.lr = schedule.lr(epoch, batch * comm->size());  // the schedule scales with the global batch
    const auto t0 = Clock::now();
    notify([&](RunObserver& o) { o.epoch_start(st.epoch); });
    // A resumed epoch continues where its checkpoint was taken.
    const int64_t first_step = epoch == pos.epoch ? pos.step_in_epoch : 0;
    train_loader.start_epoch(epoch, first_step);
    sync.reset_stats();
    double loss_sum = epoch == pos.epoch ? pos.epoch_loss_sum : 0;
    bool checkpoint_due = tc.checkpoint_every > 0 && !tc.checkpoint_every_steps &&
                          (epoch + 1) % tc.checkpoint_every == 0;
    for (int64_t s = first_step; s < train_steps; ++s) {
      try {
        const double loss = train_step(train_loader, st.lr, s);
        loss_sum += loss;
        ++pos.global_step;
        ++summary.steps;
        ++profiled_steps;
        if (tc.checkpoint_every_steps && tc.checkpoint_every > 0 &&
            pos.global_step % tc.checkpoint_every == 0) {
          if (s + 1 < train_steps) {
            double job_sum = loss_sum;  // the epoch's loss so far, summed over ranks
            comm->allreduce_sum(&job_sum, 1);
            checkpoint(epoch, s + 1, job_sum, "");
          } else {
            checkpoint_due = true;  // after validation, as the epoch's checkpoint
          }
        }
        if (!observers.empty()) {
          StepInfo si;
          si.epoch = st.epoch;
          si.step_in_epoch = s + 1;
          si.steps_per_epoch = train_steps;
          si.global_step = pos.global_step;
          si.loss = loss;  // this rank's batch loss (the epoch figures below are job-wide)
          si.epoch_elapsed_s = since(t0);
          notify([&](RunObserver& o) { o.step_end(si); });
        }
      } catch (const Error& e) {
        throw Error(e.kind(), "epoch " + std::to_string(epoch + 1) + ": " + e.what());
      }
    }
    // Job-wide figures: sums over ranks (losses and counts), data wait as the ranks' mean.
    double train_sums[5] = {loss_sum, static_cast<double>(train_steps - first_step),
                            train_loader.stats().wait_s, sync.stats().allreduce_s,
                            sync.stats().finish_wait_s};
    comm->allreduce_sum(train_sums, 5);
    st.allreduce_s = train_sums[3] / comm->size();
    st.allreduce_exposed_s = train_sums[4] / comm->size();
    int64_t counts[2] = {train_loader.stats().skipped, train_loader.stats().cache_hits};
    comm->allreduce_sum(counts, 2);
    st.data_wait_s = train_sums[2] / comm->size();
    st.skipped = counts[0];
    st.cache_hits = counts[1];
    // Mean over the whole epoch's steps (a resumed epoch brings its earlier steps' sum along).
    st.train_loss = train_sums[0] / static_cast<double>(train_steps * comm->size());
    const double train_s = since(t0);
    st.train_seconds = train_s;
    st.samples_per_s =
        static_cast<double>((train_steps - first_step) * batch * comm->size()) / train_s;
    if (valid_loader) {
      const int64_t valid_steps = valid_loader->plan().batches;
      double vl = 0, vm = 0;
      notify([&](RunObserver& o) { o.eval_start(st.epoch); });
      ex.set_profiling(false);  // the report's per-layer times are per training step
      valid_loader->start_epoch(epoch);
      for (int64_t s = 0; s < valid_steps; ++s) {
        const LoadedBatch b = valid_loader->next();
        feed(b);
        ex.forward(false);
        vl += ex.last_data_loss();
        vm += mean_abs_error(pred, b.y);
        valid_loader->release(b);
      }
      // Every batch has the same size, so the mean of batch means over all ranks is the mean.
      double valid_sums[4] = {vl, vm, static_cast<double>(valid_steps),
                              static_cast<double>(valid_loader->stats().skipped)};
      comm->allreduce_sum(valid_sums, 4);
      st.skipped += static_cast<int64_t>(valid_sums[3]);
      st.val_loss = valid_sums[0] / valid_sums[2];
      st.val_mae = valid_sums[1] / valid_sums[2];
      st.validated = true;
      ex.set_profiling(config.train.report);
      notify([&](RunObserver& o) { o.eval_stop(st.epoch); });
    }
    st.seconds = since(t0);
    summary.epochs.push_back(st);
    notify([&](RunObserver& o) { o.epoch_stop(st); });
    log << "epoch " << st.epoch << "/" << config.data.n_epochs << std::fixed << std::setprecision(4)
        << "  loss " << st.train_loss;
    if (valid_loader) log << "  val_loss " << st.val_loss << "  val_mae " << st.val_mae;
    log << std::setprecision(5) << "  lr " << st.lr << std::setprecision(2) << "  "
        << st.samples_per_s << " samples/s  data wait " << std::setprecision(1)
        << 100.0 * st.data_wait_s / std::max(train_s, 1e-9) << "%  " << std::setprecision(1)
        << st.seconds << " s";
    if (st.skipped > 0) log << "  (" << st.skipped << " bad samples skipped)";
    // The rest of the run at this invocation's mean epoch time (the first epoch included: it
    // pays for cache misses the others do not, so the estimate errs long early on).
    run_epoch_s += st.seconds;
    ++run_epochs;
    if (epoch + 1 < config.data.n_epochs)
      log << "  ETA "
          << human_duration(run_epoch_s / run_epochs * (config.data.n_epochs - epoch - 1));
    log << "\n";
    log.flush();
    // Stop rules, then the epoch's checkpoint (which records the early-stopping state).
    bool stop = false;
    if (valid_loader && tc.target_mae && st.val_mae <= *tc.target_mae) {
      log << std::setprecision(4) << "target reached: val_mae " << st.val_mae
          << " <= " << *tc.target_mae << "\n";
      stop = true;
    }
    if (!stop && valid_loader && tc.early_stopping_patience) {
      if (st.val_loss < pos.best_val_loss) {
        pos.best_val_loss = st.val_loss;
        pos.epochs_since_best = 0;
      } else if (++pos.epochs_since_best >= *tc.early_stopping_patience) {
        log << "early stopping: val_loss has not improved for " << pos.epochs_since_best
            << " epochs\n";
        summary.status = tc.target_mae ? "aborted" : "success";
        stop = true;
      }
    }
    const bool last = stop || epoch + 1 == config.data.n_epochs;
    if (last && !stop && tc.target_mae) summary.status = "aborted";
    if (checkpoint_due || last) checkpoint(epoch + 1, 0, 0.0, last ? summary.status : "");
    if (stop) break;
  }
  // The weights first: they are the run's result, the timeline only describes it.
  if (!options.save_weights.empty() && comm->rank() == 0) {  // identical on every rank
    save_weights(
        ex.params(), options.save_weights,
        {{"format", "crest weights"}, {"model", config.model.name}, {"config", config.source}});
    log << "weights saved to " << options.save_weights << "\n";
  }
  timeline.write(*comm);
  if (timeline.enabled())
    log << "timeline written to "
        << (options.timeline.empty() ? config.dist.timeline : options.timeline) << "\n";
  if (config.train.report)
    notify([&](RunObserver& o) { o.layer_profile(ex.profile(), profiled_steps); });
  notify([&](RunObserver& o) { o.run_stop(summary); });
  log << std::fixed << "done: " << summary.epochs.size() << " epochs in " << std::setprecision(1)
      << since(t_start) << " s";
  if (!summary.epochs.empty()) {
    const EpochStats& last = summary.epochs.back();
    log << "; final loss " << std::setprecision(4) << last.train_loss;
    if (last.validated) log << ", val_mae " << last.val_mae;
  }
  log << "; " << with_thousands(summary.parameter_count) << " parameters; status " << summary.status
      << "\n";
  return summary;
}

}  // namespace crest
