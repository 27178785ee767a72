// crest bench train: time training steps of a model on random data and print one JSON line
//   (samples/s from the best step, FLOP/s from the analytic model FLOPs, peak RSS);
//   --profile adds one JSON line per layer (forward/backward time and GFLOP/s); --report DIR
//   writes DIR/report.{json,html} (the performance report, docs/report.md) from the same figures.
// crest bench peak: the machine's GEMM rate, fp32, bf16 and fp16, the roofline reference.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <tuple>
#include <vector>

#include "bench_model.hpp"
#include "commands.hpp"
#include "crest/core/cpus.hpp"
#include "crest/core/error.hpp"
#include "crest/core/host_staging.hpp"
#include "crest/core/name_registry.hpp"
#include "crest/dist/communicator.hpp"
#include "crest/dist/gradient_sync.hpp"
#include "crest/engine/training_session.hpp"
#include "crest/graph/executor.hpp"
#include "crest/models/model_registry.hpp"
#include "crest/optim/optimizer_registry.hpp"
#include "crest/spatial/hybrid_groups.hpp"
#include "crest/train/report.hpp"
#include "crest/train/trainer.hpp"

namespace crest::tools {
namespace {

struct BenchTrainArgs : BenchModelArgs, BenchRunArgs {
  int64_t batch = 2;
  int steps = 3, warmup = 1;
  bool profile = false;
  std::string report;      // directory for report.{json,html}; "" = none
  double peak_gflops = 0;  // the report's peak; 0 = measure it after the run
  // Under mpirun: gradient buckets, and the 1-rank samples/s the scaling efficiency is against.
  double bucket_mb = 25, first_bucket_mb = 1, baseline = 0, timeout_s = 300;
  std::string compress = "none";
  BenchLagArgs lag;
  int local_sgd = 1;      // as train.local_sgd.steps (1: synchronous)
  std::string optimizer;  // a registered optimizer; "" = the model's reference optimizer
  // Under mpirun: each sample split among groups of ranks along its spatial axes (dist.spatial).
  std::vector<int> spatial;
  std::string halo_overlap = "auto";  // as dist.halo_overlap
  // Under mpirun: every rank trains its own replica and nothing is exchanged, so the run measures
  // what its ranks compute while they share the node (crest plan calibrate's co-running compute).
  bool independent = false;
  bool graphs = false;  // as crest.cuda_graphs
};

// Tag of the message an independent rank sends each other rank when its timed steps are done.
constexpr int kTimedStepsDoneTag = 0x7e57b01;

// An independent rank's timed steps must all run while the other ranks compute too (the point of
// the measurement), so a rank that is done keeps stepping, untimed, until every rank is.
void step_until_every_rank_is_timed(Communicator& comm, const std::function<void()>& step) {
  for (int r = 0; r < comm.size(); ++r)
    if (r != comm.rank()) comm.send(r, kTimedStepsDoneTag, {});
  for (int waiting = comm.size() - 1; waiting > 0;) {
    if (comm.try_receive(Communicator::kAnySource, kTimedStepsDoneTag)) {
      --waiting;
      continue;
    }
    step();
  }
}

void check_bench_train_args(const BenchTrainArgs& a) {
  if (a.steps < 1 || a.warmup < 0 || a.batch < 1)
    throw_usage("bench train: --steps >= 1, --warmup >= 0, --batch >= 1");
  if (a.peak_gflops < 0) throw_usage("bench train: --peak-gflops must be > 0 (or 0 to measure it)");
  check_lag_args(a.lag, "bench train");
  if (a.local_sgd < 1) throw_usage("bench train: --local-sgd must be >= 1 steps per window");
  if (a.local_sgd > 1 && a.lag.gradient_lag > 0)
    throw_usage(
        "bench train: --local-sgd does not combine with --gradient-lag, as train.local_sgd does "
        "not");
  if (a.independent && (a.lag.gradient_lag > 0 || a.local_sgd > 1 || !a.spatial.empty() ||
                        a.baseline > 0 || a.compress != "none"))
    throw_usage(
        "bench train: --independent exchanges nothing, so it takes none of --gradient-lag, "
        "--local-sgd, --spatial, --compress and --baseline");
}

// The halo exchanges of a split run: this rank's per layer, and the job's per step (every rank's
// exchanges summed, per rank).
struct HaloFigures {
  std::vector<SpatialSplit::HaloLayer> layers;
  double exchange_s = 0, exposed_s = 0;
  double hidden_fraction() const { return exchange_s > 0 ? 1 - exposed_s / exchange_s : 0; }
  const SpatialSplit::HaloLayer* layer(const std::string& name) const {
    for (const auto& l : layers)
      if (l.layer == name) return &l;
    return nullptr;
  }
};

// Collective over `comm` (every rank calls it, split or not).
// The least mean of `h` consecutive entries of `times`, taken in blocks from the first (a
// whole block's mean; of all of them when fewer than h).
double best_window_mean(const std::vector<double>& times, int h) {
  const auto n = static_cast<size_t>(std::max(h, 1));
  double best = 0;
  for (size_t at = 0; at == 0 || at + n <= times.size(); at += n) {
    const size_t end = std::min(times.size(), at + n);
    double sum = 0;
    for (size_t i = at; i < end; ++i) sum += times[i];
    const double mean = end > at ? sum / static_cast<double>(end - at) : 0.0;
    best = at == 0 ? mean : std::min(best, mean);
  }
  return best;
}

HaloFigures halo_figures(const SpatialSplit* split, Communicator& comm, int steps) {
  HaloFigures f;
  double sums[2] = {0, 0};
  if (split) {
    f.layers = split->halo_layers();
    for (const auto& l : f.layers) {
      sums[0] += l.transfer_s;
      sums[1] += l.exposed_s;
    }
  }
  comm.allreduce_sum(sums, 2);
  const double per = static_cast<double>(comm.size()) * std::max(steps, 1);
  f.exchange_s = sums[0] / per;
  f.exposed_s = sums[1] / per;
  return f;
}

void bench_train(const BenchTrainArgs& a) {
  check_bench_train_args(a);
  // Before the benchmark, not after it: an unwritable report directory fails in the first second.
  if (!a.report.empty()) check_report_dir(a.report);
  WorldOptions wo;
  wo.timeout_s = a.timeout_s;
  auto comm = make_world_communicator(wo);
  const BuiltModel m = build_model(bench_model_config(a));
  // --spatial d,h,w: each group of that many consecutive ranks shares one sample.
  const HybridGroups groups =
      make_hybrid_groups(*comm, a.spatial, "bench train: --spatial",
                         parse_halo_overlap(a.halo_overlap, "bench train: --halo-overlap"));
  TrainingSessionOptions to;
  to.session = bench_session_options(a, Purpose::training, a.batch, comm->local_size());
  to.session.spatial = groups.split;
  to.session.split_outputs = true;  // as crest train: nothing gathers the prediction
  to.spatial_group = groups.spatial.get();
  to.optimizer = bench_optimizer_config(a.model, a.optimizer);
  to.sync = {.first_bucket_mb = a.first_bucket_mb,
             .bucket_mb = a.bucket_mb,
             .compression = parse_gradient_compression(a.compress),
             .timeout_s = a.timeout_s};
  set_lag_options(a.lag, to);
  to.step_graphs = a.graphs;
  // Ranks that share samples: the global batch counts each sample once.
  const int data_parallel = groups.data_parallel;
  // --independent: the replica trains on a communicator of its own rank alone.
  const auto alone = a.independent ? make_single_process_communicator() : nullptr;
  const TrainingSession session(m.graph, to, alone ? *alone : *comm);
  Backend& backend = session.backend();
  Executor& ex = session.executor();
  GradientSync& sync = session.sync();
  TrainStep& train_step = session.step();
  // What the backend really uses is reported (the reference backend runs on one thread).
  const int threads = session.session().threads();
  const double compile_s = session.session().compile_seconds();
  fill_random_batch(ex, m, backend);
  // Local SGD: windows of H steps, the last of each averaging the models (its step is the slow
  // one, so a window's mean step, not the best step, is what it costs per step).
  train_step.set_local_steps(a.local_sgd);
  auto step = [&] { return train_step.run(1e-3); };
  for (int i = 0; i < a.warmup; ++i) step();
  sync.reset_stats();
  if (groups.split) groups.split->reset_halo_timing();
  // The report's per-layer table needs the profile too.
  ex.set_profiling(a.profile || !a.report.empty());
  std::vector<double> times, waits, allreduces, updates;  // per timed step, this rank's
  for (int i = 0; i < a.steps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const GradientSyncStats before = sync.stats();
    const StepResult r = step();
    updates.push_back(r.update_done - r.gradients_done);
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    waits.push_back(sync.stats().finish_wait_s - before.finish_wait_s);
    allreduces.push_back(sync.stats().allreduce_s - before.allreduce_s);
  }
  if (a.independent) {
    ex.set_profiling(false);  // the profile is the timed steps'
    step_until_every_rank_is_timed(*comm, [&] { step(); });
  }
  train_step.settle();  // a lagged allreduce still in flight
  train_step.end_local_window();
  // Every rank's per-step figures, to tell communication from waiting for slower ranks.
  std::vector<std::vector<double>> all_waits, all_allreduces;
  for (auto [mine, all] :
       {std::pair{&waits, &all_waits}, std::pair{&allreduces, &all_allreduces}}) {
    std::vector<std::byte> bytes(mine->size() * sizeof(double));
    std::memcpy(bytes.data(), mine->data(), bytes.size());
    for (const auto& part : comm->allgather_parts(bytes)) {
      all->emplace_back(part.size() / sizeof(double));
      std::memcpy(all->back().data(), part.data(), part.size());
    }
  }
  // Independent ranks exchange nothing (and may time different numbers of steps).
  const OverlapFigures overlap =
      a.independent ? OverlapFigures{} : overlap_figures(all_waits, all_allreduces);
  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  // Steps are synchronous across ranks (the allreduce), so the slowest rank's best step is the
  // job's; the same for memory.
  const double best = comm->allreduce_max(sorted.front());
  const double median = comm->allreduce_max(sorted[sorted.size() / 2]);
  double sum = 0;
  for (double t : times) sum += t;
  const double mean = comm->allreduce_max(sum / static_cast<double>(times.size()));
  // How much a rank's step varies (crest plan's compute.step_jitter is this over the mean): the
  // largest of the ranks' sample standard deviations.
  const double my_mean = sum / static_cast<double>(times.size());
  double squares = 0;
  for (double t : times) squares += (t - my_mean) * (t - my_mean);
  const double stdev = comm->allreduce_max(
      times.size() > 1 ? std::sqrt(squares / static_cast<double>(times.size() - 1)) : 0.0);
  // Local SGD: every H consecutive steps hold one averaging step, so the best run of H steps'
  // mean is what a window costs per step at best (as step_s_min is for a synchronous step).
  const double window = comm->allreduce_max(best_window_mean(times, a.local_sgd));
  const double rss = comm->allreduce_max(peak_rss_mb());
  const double exposed = overlap.exposed_s;
  const double allreduce = overlap.allreduce_s;
  const HaloFigures halo = halo_figures(groups.split.get(), *comm, a.steps);
  if (comm->rank() != 0) return;
  const double flops = ex.training_flops();  // per batch
  nlohmann::json j =
      bench_json_head("train", a, backend, enum_name(to.session.precision), a.batch, threads);
  j["steps"] = a.steps;
  j["step_s_min"] = best;
  j["step_s_median"] = median;
  j["step_s_mean"] = mean;
  j["step_s_stdev"] = stdev;
  // The optimizer's share (and the finiteness check before it): rank 0's best step.
  j["update_s_min"] = *std::min_element(updates.begin(), updates.end());
  j["samples_per_s"] = static_cast<double>(a.batch * data_parallel) / best;  // global
  j["gflop_per_sample"] = flops / static_cast<double>(a.batch) / 1e9;
  j["gflops"] = flops * comm->size() / best / 1e9;
  j["compile_s"] = compile_s;
  j["arena_mb"] = static_cast<double>(ex.plan().arena_bytes) / (1 << 20);
  j["peak_rss_mb"] = rss;  // per rank, the largest
  j["peak_rss_mb_per_sample"] = rss / static_cast<double>(a.batch);
  j["ranks"] = comm->size();
  j["node_ranks"] = comm->local_size();  // the ranks that computed on rank 0's node
  if (a.independent) j["independent"] = true;
  if (a.graphs)  // the steps and updates recorded, and those that launched a recording again
    j["graphs"] = {{"recorded_steps", train_step.recorded_steps()},
                   {"replayed_steps", train_step.replayed_steps()},
                   {"recorded_updates", train_step.recorded_updates()},
                   {"replayed_updates", train_step.replayed_updates()}};
  j["optimizer"] = to.optimizer.name;
  j["trainable_bytes"] = ex.params().trainable_bytes();
  if (to.session.spatial) {
    j["spatial"] = spatial_text(a.spatial);
    j["data_parallel"] = data_parallel;
    j["halo_overlap"] = a.halo_overlap;
    j["halo_exchange_s_per_step"] = halo.exchange_s;
    j["halo_exposed_s_per_step"] = halo.exposed_s;
    j["halo_hidden_fraction"] = halo.hidden_fraction();
  }
  if (comm->size() > 1 && !a.independent) {
    j["global_batch"] = a.batch * data_parallel;
    j["gradient_buckets"] = sync.buckets().size();
    j["compress"] = a.compress;
    j["gradient_lag"] = a.lag.gradient_lag;
    j["lag_correction"] = a.lag.lag_correction;
    j["local_sgd_steps"] = a.local_sgd;
    if (a.local_sgd > 1) j["window_step_s_min"] = window;
    j["allreduce_s_per_step"] = allreduce;
    j["exposed_allreduce_s_per_step"] = exposed;
    j["hidden_fraction"] = overlap.hidden_fraction();
    // The same without load imbalance: the network's time, and the part of it backward did not
    // hide.
    j["communication_s_per_step"] = overlap.communication_s;
    j["exposed_communication_s_per_step"] = overlap.exposed_communication_s;
    j["imbalance_wait_s_per_step"] = overlap.imbalance_s;
    j["hidden_fraction_excluding_imbalance"] = overlap.hidden_fraction_excluding_imbalance();
    if (a.baseline > 0) {
      j["baseline_samples_per_s"] = a.baseline;
      j["scaling_efficiency"] = static_cast<double>(a.batch * data_parallel) / best / a.baseline;
    }
  }
  if (!a.report.empty()) {
    PerformanceReport r;
    ReportRun& u = r.run;
    u.source = "crest bench train";
    u.model = a.model;
    u.config = size_flags(a) + " --batch " + std::to_string(a.batch) + " --steps " +
               std::to_string(a.steps) + " --warmup " + std::to_string(a.warmup) + " --threads " +
               std::to_string(threads);
    u.backend = backend.name();
    u.isa = backend.instruction_sets();
    u.status = "measured";
    u.ranks = comm->size();
    u.nodes = (comm->size() + comm->local_size() - 1) / comm->local_size();
    u.threads = threads;
    u.batch_per_rank = a.batch;
    u.global_batch = a.batch * comm->size();
    u.parameter_count = ex.params().parameter_count();
    u.train_flops_per_step = flops;
    u.samples_per_s = j["samples_per_s"].get<double>();
    u.step_s = best;
    u.step_s_median = median;
    if (a.peak_gflops > 0)
      r.peak =
          ReportPeak{a.peak_gflops, "given",
                     "given with --peak-gflops (for example a figure from `crest bench peak`)"};
    else
      r.peak = measure_report_peak(backend, threads);
    r.profiled_steps = a.steps;
    r.layers = report_layers(ex.profile(), a.steps, r.peak.gflops);
    if (groups.split) add_halo_layers(r.layers, groups.split->halo_layers(), a.steps);
    for (double t : times) r.time.steps_s += t;  // rank 0's timed steps
    r.time.allreduce_s = allreduce * a.steps;
    r.time.allreduce_exposed_s = exposed * a.steps;
    r.notes = {
        "A benchmark: random data already in memory, so no input pipeline and no data wait; no "
        "epochs, "
        "no losses.",
        "Throughput and step time are from the best of " + std::to_string(a.steps) +
            " timed steps (the slowest rank's); the time breakdown sums all timed steps.",
        "Per-layer times are rank 0's, from a clock read around every op of every timed step."};
    j["report"] = write_report(a.report, r);
    std::cerr << "report: " << j["report"].get<std::string>() << " (and report.json)\n";
  }
  std::cout << j.dump() << std::endl;
  if (a.profile) {
    for (const OpProfile& p : ex.profile()) {
      nlohmann::json l;
      l["layer"] = p.name;
      l["kind"] = p.kind;
      if (!p.implementation.empty()) l["implementation"] = p.implementation;
      l["forward_ms"] = 1e3 * p.forward_s / a.steps;
      l["forward_flop"] = p.flops.forward;  // per batch: tells a layer from another of its name
      l["backward_ms"] = 1e3 * p.backward_s / a.steps;
      l["forward_gflops"] = p.forward_s > 0 ? p.flops.forward * a.steps / p.forward_s / 1e9 : 0.0;
      const double bflops = p.flops.backward_data + p.flops.backward_weights;
      l["backward_gflops"] = p.backward_s > 0 ? bflops * a.steps / p.backward_s / 1e9 : 0.0;
      if (const auto* h = halo.layer(p.name)) {
        l["halo"] = h->overlap;
        l["halo_exchange_ms"] = 1e3 * h->transfer_s / a.steps;
        l["halo_exposed_ms"] = 1e3 * h->exposed_s / a.steps;
        l["halo_hidden_fraction"] = h->hidden_fraction;
      }
      std::cout << l.dump() << "\n";
    }
  }
}

void bench_peak(const std::string& backend_name, int threads_arg, int64_t n, int iters) {
  auto backend = make_backend(backend_name);
  const int threads =
      backend->set_threads(threads_arg > 0 ? threads_arg : default_threads_per_rank(1));
  for (DType t : {DType::f32, DType::bf16, DType::f16}) {
    const PeakRate p = backend->peak(t, n, iters);
    nlohmann::json j;
    j["bench"] = "peak";
    j["dtype"] = dtype_name(t);
    j["backend"] = backend->name();
    j["threads"] = threads;
    j["m"] = j["n"] = j["k"] = n;
    j["supported"] = p.supported;
    j["gflops"] = p.gflops;
    j["implementation"] = p.implementation;
    j["isa"] = backend->instruction_sets();
    std::cout << j.dump() << std::endl;
  }
}

}  // namespace

void register_bench(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "benchmarks that print JSON lines");
  bench->require_subcommand(1);
  auto ta = std::make_shared<BenchTrainArgs>();
  CLI::App* train = bench->add_subcommand("train", "time training steps on random data");
  add_model_options(*train, *ta);
  train->add_option("--batch", ta->batch, "batch size");
  train->add_option("--steps", ta->steps, "timed steps");
  train->add_option("--warmup", ta->warmup, "untimed steps first");
  train->add_option("--threads", ta->threads,
                    std::string("compute threads per rank (") + kDefaultThreadsHelp + ")");
  train->add_option("--backend", ta->backend, "a registered backend (default: the fastest built)");
  train->add_option("--precision", ta->precision,
                    "float32, bf16 or fp16 (mixed precision: 16-bit activations, float32 weights)");
  train->add_flag("--profile", ta->profile, "also print per-layer times");
  train->add_flag(
      "--graphs", ta->graphs,
      "record each step's passes as one CUDA graph (crest.cuda_graphs; --backend cuda)");
  train->add_flag("--autotune", ta->autotune,
                  "choose each convolution's layouts by timing the candidates (crest.autotune)");
  train->add_option("--report", ta->report,
                    "write DIR/report.html and DIR/report.json (the performance report)");
  train->add_option(
      "--peak-gflops", ta->peak_gflops,
      "the report's peak (GFLOP/s per rank, e.g. from `crest bench peak`); default: measure it");
  train->add_option("--bucket-mb", ta->bucket_mb, "under mpirun: gradient bucket size (MB)");
  train->add_option("--first-bucket-mb", ta->first_bucket_mb,
                    "under mpirun: first gradient bucket size (MB)");
  train->add_option(
      "--baseline", ta->baseline,
      "under mpirun: samples/s of the 1-rank run to compare with (scaling_efficiency)");
  train->add_option("--optimizer", ta->optimizer,
                    "a registered optimizer (default: the model's reference, CosmoFlow's SGD with "
                    "momentum 0.9 or DeepCAM's LAMB)");
  train->add_option("--compress", ta->compress,
                    "under mpirun: gradient buckets as none (float32), bf16 or fp16");
  add_lag_options(*train, ta->lag);
  train->add_option("--local-sgd", ta->local_sgd,
                    "under mpirun: H local steps per window, the last averaging the models (as "
                    "train.local_sgd.steps); step_s_mean is a window's cost per step");
  train
      ->add_option("--spatial", ta->spatial,
                   "under mpirun: split each sample among this many ranks per spatial axis "
                   "(d,h,w for CosmoFlow), as dist.spatial")
      ->delimiter(',');
  train->add_option("--halo-overlap", ta->halo_overlap,
                    "with --spatial: auto, always or off, as dist.halo_overlap");
  train->add_flag("--independent", ta->independent,
                  "under mpirun: every rank trains its own replica, nothing exchanged (what the "
                  "node's ranks compute side by side, for crest plan calibrate)");
  train->add_option("--timeout", ta->timeout_s,
                    "under mpirun: watchdog deadline of each collective (s)");
  train->callback([ta] { bench_train(*ta); });

  auto threads = std::make_shared<int>(0);
  auto n = std::make_shared<int64_t>(2048);
  auto iters = std::make_shared<int>(5);
  auto peak_backend = std::make_shared<std::string>(default_backend_name());
  CLI::App* peak =
      bench->add_subcommand("peak", "GEMM GFLOP/s (fp32, bf16, fp16): the roofline reference");
  peak->add_option("--threads", *threads,
                   std::string("compute threads (") + kDefaultThreadsHelp + ")");
  peak->add_option("--size", *n, "matrix size");
  peak->add_option("--iters", *iters, "timed runs (best is reported)");
  peak->add_option("--backend", *peak_backend, "a registered backend (default: the fastest built)");
  peak->callback(
      [peak_backend, threads, n, iters] { bench_peak(*peak_backend, *threads, *n, *iters); });
  register_bench_loader(*bench);
  register_bench_allreduce(*bench);
  register_bench_infer(*bench);
  register_bench_pipeline(*bench);
}

}  // namespace crest::tools
