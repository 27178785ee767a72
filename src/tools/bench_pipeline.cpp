// crest bench pipeline: under `mpirun -np K` (or K x D with --stages K: D data-parallel
// replicas of the pipeline), a model cut into K stages trains batches of M micro-batches on
// random data (crest/engine/pipeline_train_step.hpp: the schedule, the replicas' allreduce, the
// model's reference optimizer) and prints one JSON line: the step time (the slowest rank's, best
// step), and per stage its layers, its compute time, its activation memory and the parameter
// buffers its rank holds (the stage's; the whole model's on rank 0 alone); the measured
// bubble (the share of the schedule's time the stages waited, 1 - mean compute / schedule) beside
// the schedule's (K - 1) / (M + K - 1), and the schedule's bubble at the stages' measured
// (unequal) compute times. The stages are cut where the measured time of a training step
// balances (--balance flops: its FLOPs; --stage-starts names the first layer of each stage after
// the first instead). --spatial d,h,w splits each stage's samples among a group of that many
// ranks (as dist.spatial with dist.pipeline): the ranks are then stages x groups x replicas.
#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "bench_model.hpp"
#include "commands.hpp"
#include "crest/core/error.hpp"
#include "crest/core/parallel_for.hpp"
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
  std::string balance = "time";  // cut where the measured time (or the FLOPs) of the stages balance
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

// The best timed batch: the slowest rank's step and schedule, and this rank's compute.
struct BestTimes {
  double step_s = 1e300, schedule_s = 1e300, compute_s = 1e300;
};

BestTimes time_batches(const BenchPipelineArgs& a, PipelineTrainStep& step,
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
    best.schedule_s = std::min(best.schedule_s, comm.allreduce_max(r.schedule_s));
    best.compute_s = std::min(best.compute_s, r.compute_s);
  }
  return best;
}

// The JSON line's pipeline figures; `stages` holds every rank's, replica 0's first.
void add_pipeline_figures(nlohmann::json& j, const BenchPipelineArgs& a, const PipelineRanks& at,
                          const BestTimes& best, const std::vector<nlohmann::json>& stages) {
  double compute_sum = 0, compute_max = 0;
  for (int s = 0; s < at.stages; ++s) {
    const nlohmann::json& first =
        stages[static_cast<size_t>(s) * static_cast<size_t>(at.group_size)];  // place 0
    j["stages"].push_back(first);
    const double c = first["compute_s"].get<double>();
    compute_sum += c;
    compute_max = std::max(compute_max, c);
  }
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

void bench_pipeline(const BenchPipelineArgs& a) {
  if (a.steps < 1 || a.warmup < 0 || a.micro_batch < 1 || a.micro_batches < 1)
    throw_usage("bench pipeline: --steps >= 1, --warmup >= 0, --batch >= 1, --micro-batches >= 1");
  const PipelineScheduleKind schedule = parse_schedule(a.schedule);
  WorldOptions wo;
  wo.timeout_s = a.timeout_s;
  auto comm = make_world_communicator(wo);
  const BuiltModel m = build_model(bench_model_config(a));
  TrainingSessionOptions to;
  to.session = bench_session_options(a, Purpose::training, a.micro_batch,
                                     std::max(1, hardware_threads() / comm->local_size()));
  to.optimizer = bench_optimizer_config(a.model, a.optimizer);
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
  const PipelineTrainingSession session(m.graph, to, po, *comm);
  const PipelineRanks& at = session.ranks();
  const PipelineStageGraph& mine = session.stage_graph();
  PipelineStage& runner = session.stage();
  PipelineTrainStep& step = session.step();
  const std::vector<double> flops = node_training_flops(m.graph, session.whole().executor());
  auto feed = [&](int, Executor& ex) {
    if (!mine.data_inputs.empty()) fill_random_batch(ex, m, session.backend(), mine.data_inputs);
  };
  const BestTimes best = time_batches(a, step, feed, *comm);
  const auto all = gather_json(
      *comm, {{"stage", at.stage},
              {"first_layer", mine.first_node_name},
              {"last_layer", mine.last_node_name},
              {"gflop_per_micro_batch", stage_flops(flops, mine) / 1e9},
              {"compute_s", best.compute_s},
              {"activation_sets", runner.activation_sets()},
              {"activation_mb", static_cast<double>(runner.activation_bytes()) / (1 << 20)},
              {"parameter_mb", mib(2 * runner.executor().params().bytes())},
              {"whole_model_parameter_mb", mib(held_bytes(session.whole().executor().params()))},
              {"sent_values", mine.sent.size()}});
  if (comm->rank() != 0) return;
  nlohmann::json j = bench_json_head("pipeline", a, session.backend(), a.precision, a.micro_batch,
                                     session.whole().threads());
  j["optimizer"] = to.optimizer.name;
  add_pipeline_figures(j, a, at, best, all);
  std::cout << j.dump() << std::endl;
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
                  "compute threads per rank (default: the node's cores / ranks)");
  cmd->add_option("--stages", a->stages,
                  "pipeline stages (default: one per rank); the ranks are stages x replicas");
  cmd->add_option("--spatial", a->spatial,
                  "split each stage's samples among this many ranks per spatial axis (d,h,w for "
                  "CosmoFlow), as dist.spatial")
      ->delimiter(',');
  cmd->add_option("--optimizer", a->optimizer, "a registered optimizer (default: the model's)");
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
  cmd->add_option("--steps", a->steps, "timed batches");
  cmd->add_option("--warmup", a->warmup, "untimed batches first");
  cmd->add_option("--timeout-s", a->timeout_s, "a message's deadline");
  cmd->callback([a] { bench_pipeline(*a); });
}

}  // namespace crest::tools
