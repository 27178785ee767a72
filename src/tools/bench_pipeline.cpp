// crest bench pipeline: under `mpirun -np K` (or K x D with --stages K: D data-parallel
// replicas of the pipeline), a model cut into K stages trains batches of M micro-batches on
// random data (crest/engine/pipeline_train_step.hpp: the schedule, the replicas' allreduce, the
// model's reference optimizer) and prints one JSON line: the step time (the slowest rank's, best
// step), and per stage its layers, its compute time, its activation memory and the parameter
// buffers its rank holds (the stage's; the whole model's on rank 0 alone); the measured
// bubble (the share of the schedule's time the stages waited, 1 - mean compute / schedule, in
// the batch with the shortest schedule) beside the schedule's (K - 1) / (M + K - 1), and the
// schedule's bubble at the stages' measured (unequal) compute times. The stages are cut where
// the measured time of a training step balances (--balance flops: its FLOPs; --stage-starts
// names the first layer of each stage after the first instead); with --balance time the cut is
// then corrected from the stages' own compute times (--rebalance rounds: each stage's nodes
// rescaled to what the stage measured, the model cut again, the batches timed again while the
// cut moves). --spatial d,h,w splits each stage's samples among a group of that many ranks (as
// dist.spatial with dist.pipeline): the ranks are then stages x groups x replicas.
// --gradient-lag 1 (and --lag-correction local) lags the replicas' allreduce behind the next
// batch's schedule, as train.gradient_lag does.
#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "bench_model.hpp"
#include "commands.hpp"
#include "crest/core/error.hpp"
#include "crest/dist/communicator.hpp"
#include "crest/engine/pipeline_training_session.hpp"
#include "crest/engine/session.hpp"
#include "crest/graph/pipeline_cut.hpp"
#include "crest/models/model_registry.hpp"
#include "crest/optim/optimizer_registry.hpp"
#include "crest/spatial/hybrid_groups.hpp"
#include "crest/train/trainer.hpp"

namespace crest::tools {
namespace {

struct BenchPipelineArgs : BenchModelArgs, BenchRunArgs {
  int64_t micro_batch = 1;
  int micro_batches = 4, steps = 3, warmup = 1;
  std::string schedule = "1f1b";
  bool recompute = false;
  std::vector<std::string> stage_starts;
  int stages = 0;            // 0: one per rank; else the ranks are stages x data-parallel replicas
  std::vector<int> spatial;  // each stage's samples split among this many ranks per axis
  std::string optimizer;     // "" = the model's reference optimizer
  BenchLagArgs lag;          // the replicas' allreduce behind the next batch (--stages K < ranks)
  std::string balance = "time";  // cut where the measured time (or the FLOPs) of the stages balance
  int rebalance = 2;             // re-cuts from the stages' measured compute times (--balance time)
  double timeout_s = 300;
};

PipelineScheduleKind parse_schedule(const std::string& s) {
  if (s == "gpipe") return PipelineScheduleKind::gpipe;
  if (s == "1f1b") return PipelineScheduleKind::one_forward_one_backward;
  throw_usage("bench pipeline: --schedule is gpipe or 1f1b, got '" + s + "'");
}

// The stage's share of `costs`: its nodes but the upstream_gradient node it ends in.
double stage_flops(const std::vector<double>& costs, const PipelineStageGraph& s) {
  const size_t nodes = s.graph.nodes().size() - (s.sent.empty() ? 0 : 1);
  double f = 0;
  for (size_t i = s.first_node; i < s.first_node + nodes; ++i) f += costs[i];
  return f;
}

// --balance time: the costs measured on rank 0 and broadcast, so every rank cuts the model alike;
// else none (the session balances FLOPs).
std::vector<double> balance_costs(const BenchPipelineArgs& a, const BuiltModel& m,
                                  const SessionOptions& so, Communicator& comm) {
  if (a.balance != "time" && a.balance != "flops")
    throw_usage("bench pipeline: --balance is time or flops, got '" + a.balance + "'");
  if (a.balance != "time" || !a.stage_starts.empty()) return {};
  std::vector<double> costs(m.graph.nodes().size());
  // Rank 0 alone measures, so the whole model unsplit (a split layer's time is about its whole
  // time over the group: the balance is the same).
  if (comm.rank() == 0) costs = measured_node_costs(m, so);
  comm.broadcast(costs.data(), costs.size() * sizeof(double), 0);
  return costs;
}

double mib(size_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

// The parameter and gradient buffers a store holds (none where it is a layout alone).
size_t held_bytes(const ParamStore& p) {
  if (!p.allocated()) return 0;
  return p.has_gradients() ? 2 * p.bytes() : p.bytes();
}

// Every rank's JSON text, on every rank.
std::vector<nlohmann::json> gather_json(Communicator& comm, const nlohmann::json& mine) {
  const std::string text = mine.dump();
  const auto* b = reinterpret_cast<const std::byte*>(text.data());
  std::vector<nlohmann::json> all;
  for (const auto& p : comm.allgather_parts(std::vector<std::byte>(b, b + text.size())))
    all.push_back(
        nlohmann::json::parse(std::string(reinterpret_cast<const char*>(p.data()), p.size())));
  return all;
}

// A stage's whole-graph inputs (samples, targets): random values drawn once per activation set,
// then copied in for each micro-batch as a loader's batch would be, so the stage's time holds a
// batch's copy and not the drawing.
struct RandomFeed {
  const BuiltModel& model;
  Backend& backend;
  const std::vector<std::string>& inputs;
  std::map<const Executor*, std::vector<std::vector<std::byte>>> drawn;

  void feed(Executor& ex) {
    if (inputs.empty()) return;
    auto [it, first] = drawn.try_emplace(&ex);
    if (first) fill_random_batch(ex, model, backend, inputs);
    MemoryResource& memory = backend.memory();
    for (size_t i = 0; i < inputs.size(); ++i) {
      const TensorView in = ex.input(inputs[i]);
      if (first) {
        it->second.emplace_back(in.bytes());
        memory.copy_to_host(it->second.back().data(), in.data(), in.bytes());
      } else {
        memory.copy_to_device(in.data(), it->second[i].data(), in.bytes());
      }
    }
  }
};

// The timed batches: the best step (the slowest rank's), and the batch whose schedule was the
// shortest, with each stage's compute time in that batch. A bubble compares one batch's idle
// time with its own compute: one batch's best compute against another's best schedule would
// count the machine's noise as bubble.
struct BestTimes {
  double step_s = 1e300, schedule_s = 1e300;
  std::vector<double> stage_compute_s;      // in the batch of schedule_s
  std::vector<double> stage_compute_min_s;  // each stage's least (what a re-cut balances)
};

BestTimes time_batches(const BenchPipelineArgs& a, const PipelineRanks& at, PipelineTrainStep& step,
                       const PipelineStage::Feed& feed, Communicator& comm) {
  for (int i = 0; i < a.warmup; ++i) step.run(1e-3, feed);
  BestTimes best;
  for (int i = 0; i < a.steps; ++i) {
    comm.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    const PipelineStepResult r = step.run(1e-3, feed);
    const double mine_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best.step_s = std::min(best.step_s, comm.allreduce_max(mine_s));
    const double schedule_s = comm.allreduce_max(r.schedule_s);
    std::vector<double> compute = stage_compute_means(at, r.compute_s, comm);
    if (best.stage_compute_min_s.empty()) best.stage_compute_min_s = compute;
    for (size_t s = 0; s < compute.size(); ++s)
      best.stage_compute_min_s[s] = std::min(best.stage_compute_min_s[s], compute[s]);
    if (schedule_s < best.schedule_s) {
      best.schedule_s = schedule_s;
      best.stage_compute_s = std::move(compute);
    }
  }
  return best;
}

// The JSON line's pipeline figures; `stages` holds every rank's, replica 0's first.
void add_pipeline_figures(nlohmann::json& j, const BenchPipelineArgs& a, const PipelineRanks& at,
                          const BestTimes& best, const std::vector<nlohmann::json>& stages) {
  for (int s = 0; s < at.stages; ++s)  // place 0's
    j["stages"].push_back(stages[static_cast<size_t>(s) * static_cast<size_t>(at.group_size)]);
  const std::vector<double>& compute = best.stage_compute_s;
  double compute_sum = 0;
  for (double c : compute) compute_sum += c;
  const double compute_max = *std::max_element(compute.begin(), compute.end());
  const double slots = static_cast<double>(a.micro_batches + at.stages - 1);
  const int64_t global_batch = a.micro_batch * a.micro_batches * at.replicas;
  j["pipeline_stages"] = at.stages;
  j["ranks_per_sample"] = at.group_size;
  j["data_parallel"] = at.replicas;
  j["micro_batches"] = a.micro_batches;
  j["schedule"] = a.schedule;
  j["recompute"] = a.recompute;
  j["global_batch"] = global_batch;
  j["step_s_min"] = best.step_s;
  j["samples_per_s"] = static_cast<double>(global_batch) / best.step_s;
  j["schedule_s_min"] = best.schedule_s;  // the step without the replicas' allreduce and update
  j["bubble_measured"] = 1 - compute_sum / at.stages / best.schedule_s;
  j["bubble_schedule"] = static_cast<double>(at.stages - 1) / slots;
  // The schedule's bubble for these stages as measured: M + K - 1 slots of the slowest stage's
  // micro-batch, the stages busy for their mean.
  j["bubble_schedule_at_measured_stages"] =
      1 - compute_sum / at.stages / (compute_max * slots / a.micro_batches);
}

// The JSON line (rank 0 prints it): the run's figures, each stage's, and the cuts measured
// before this one (--rebalance).
void report_pipeline(const BenchPipelineArgs& a, const PipelineTrainingSession& session,
                     const BuiltModel& m, const std::string& optimizer, const BestTimes& best,
                     const nlohmann::json& rounds, Communicator& comm) {
  const PipelineStageGraph& mine = session.stage_graph();
  PipelineStage& runner = session.stage();
  const std::vector<double> flops = node_training_flops(m.graph, session.whole().executor());
  const auto all = gather_json(
      comm, {{"stage", session.ranks().stage},
             {"first_layer", mine.first_node_name},
             {"last_layer", mine.last_node_name},
             {"gflop_per_micro_batch", stage_flops(flops, mine) / 1e9},
             {"compute_s", best.stage_compute_s[static_cast<size_t>(session.ranks().stage)]},
             {"activation_sets", runner.activation_sets()},
             {"activation_mb", static_cast<double>(runner.activation_bytes()) / (1 << 20)},
             {"parameter_mb", mib(2 * runner.executor().params().bytes())},
             {"whole_model_parameter_mb", mib(held_bytes(session.whole().executor().params()))},
             {"sent_values", mine.sent.size()}});
  if (comm.rank() != 0) return;
  nlohmann::json j = bench_json_head("pipeline", a, session.backend(), a.precision, a.micro_batch,
                                     session.whole().threads());
  j["optimizer"] = optimizer;
  j["gradient_lag"] = a.lag.gradient_lag;
  j["lag_correction"] = a.lag.lag_correction;
  add_pipeline_figures(j, a, session.ranks(), best, all);
  j["earlier_cuts"] = rounds;
  std::cout << j.dump() << std::endl;
}

void bench_pipeline(const BenchPipelineArgs& a) {
  if (a.steps < 1 || a.warmup < 0 || a.micro_batch < 1 || a.micro_batches < 1 || a.rebalance < 0)
    throw_usage(
        "bench pipeline: --steps >= 1, --warmup >= 0, --batch >= 1, --micro-batches >= 1, "
        "--rebalance >= 0");
  const PipelineScheduleKind schedule = parse_schedule(a.schedule);
  check_lag_args(a.lag, "bench pipeline");
  WorldOptions wo;
  wo.timeout_s = a.timeout_s;
  auto comm = make_world_communicator(wo);
  const BuiltModel m = build_model(bench_model_config(a));
  TrainingSessionOptions to;
  to.session = bench_session_options(a, Purpose::training, a.micro_batch, comm->local_size());
  to.optimizer = bench_optimizer_config(a.model, a.optimizer);
  set_lag_options(a.lag, to);
  int group = 1;
  for (int parts : a.spatial) group *= std::max(1, parts);
  const int stages = a.stages > 0 ? a.stages : std::max(1, comm->size() / group);
  const HybridGroups groups = make_hybrid_groups(*comm, a.spatial, "bench pipeline: --spatial",
                                                 HaloOverlapMode::automatic, stages);
  to.session.spatial = groups.split;
  PipelineOptions po{.stages = stages,
                     .micro_batches = a.micro_batches,
                     .schedule = schedule,
                     .recompute = a.recompute,
                     .stage_starts = a.stage_starts,
                     .costs = balance_costs(a, m, to.session, *comm),
                     .stages_key = "bench pipeline: --stages",
                     .stage_starts_key = "bench pipeline: --stage-starts"};
  nlohmann::json rounds = nlohmann::json::array();  // the cuts tried before the last
  for (int round = 0;; ++round) {
    auto session = std::make_unique<PipelineTrainingSession>(m.graph, to, po, *comm);
    const PipelineRanks& at = session->ranks();
    const PipelineStageGraph& mine = session->stage_graph();
    PipelineTrainStep& step = session->step();
    RandomFeed random{m, session->backend(), mine.data_inputs, {}};
    auto feed = [&random](int, Executor& ex) { random.feed(ex); };
    const BestTimes best = time_batches(a, at, step, feed, *comm);
    std::vector<double> next = round < a.rebalance
                                   ? rebalanced_costs(po.costs, stages, best.stage_compute_min_s)
                                   : std::vector<double>{};
    if (next.empty()) {
      report_pipeline(a, *session, m, to.optimizer.name, best, rounds, *comm);
      return;
    }
    rounds.push_back({{"stage_compute_s", best.stage_compute_min_s}, {"step_s_min", best.step_s}});
    po.costs = std::move(next);
  }
}

}  // namespace

void register_bench_pipeline(CLI::App& bench) {
  auto* cmd = bench.add_subcommand(
      "pipeline", "under mpirun -np K: time a model cut into K pipeline stages (JSON line)");
  auto a = std::make_shared<BenchPipelineArgs>();
  add_model_options(*cmd, *a);
  cmd->add_option("--backend", a->backend, "a registered backend (default: the fastest built)");
  cmd->add_option("--precision", a->precision, "float32 | bf16 | fp16 | float64");
  cmd->add_option("--threads", a->threads,
                  std::string("compute threads per rank (") + kDefaultThreadsHelp + ")");
  cmd->add_option("--stages", a->stages,
                  "pipeline stages (default: one per rank); the ranks are stages x replicas");
  cmd->add_option("--spatial", a->spatial,
                  "split each stage's samples among this many ranks per spatial axis (d,h,w for "
                  "CosmoFlow), as dist.spatial")
      ->delimiter(',');
  cmd->add_option("--optimizer", a->optimizer, "a registered optimizer (default: the model's)");
  add_lag_options(*cmd, a->lag);
  cmd->add_option("--batch", a->micro_batch, "samples per micro-batch");
  cmd->add_option("--micro-batches", a->micro_batches, "micro-batches per batch (M)");
  cmd->add_option("--schedule", a->schedule, "gpipe | 1f1b");
  cmd->add_flag("--recompute", a->recompute,
                "keep only each micro-batch's inputs; recompute its forward");
  cmd->add_option("--stage-starts", a->stage_starts,
                  "the first layer of each stage after the first (default: balanced by FLOPs)")
      ->delimiter(',');
  cmd->add_option("--balance", a->balance,
                  "time (one measured step of the whole model, the default) or flops: what the "
                  "default cut balances");
  cmd->add_option("--rebalance", a->rebalance,
                  "--balance time: re-cut up to this many times where the stages' measured "
                  "compute times balance (default 2; 0: keep the first cut)");
  cmd->add_option("--steps", a->steps, "timed batches");
  cmd->add_option("--warmup", a->warmup, "untimed batches first");
  cmd->add_option("--timeout-s", a->timeout_s, "a message's deadline");
  cmd->callback([a] { bench_pipeline(*a); });
}

}  // namespace crest::tools
