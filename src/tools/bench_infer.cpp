// crest bench infer: time inference passes of a model on random data (the program crest predict
// runs: forward only, batch norm folded, no loss) and print one JSON line: samples/s from the
// best pass, latency per batch, peak RSS. Under mpirun with --spatial d,h,w each sample is split
// among groups of that many ranks (dist.spatial), as crest predict splits it.
#include <algorithm>
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <vector>

#include "bench_model.hpp"
#include "commands.hpp"
#include "crest/core/error.hpp"
#include "crest/dist/communicator.hpp"
#include "crest/engine/session.hpp"
#include "crest/graph/executor.hpp"
#include "crest/spatial/hybrid_groups.hpp"
#include "crest/train/trainer.hpp"

namespace crest::tools {
namespace {

struct BenchInferArgs : BenchModelArgs, BenchRunArgs {
  int64_t batch = 1;
  int passes = 5, warmup = 1;
  bool profile = false;
  std::vector<int> spatial;           // under mpirun: ranks per spatial axis sharing each sample
  std::string halo_overlap = "auto";  // as dist.halo_overlap
};

// One JSON line per layer: its forward time per pass and rate.
void print_profile(const Executor& ex, int passes) {
  for (const OpProfile& p : ex.profile()) {
    nlohmann::json l;
    l["layer"] = p.name;
    l["kind"] = p.kind;
    l["forward_ms"] = 1e3 * p.forward_s / passes;
    l["forward_gflops"] = p.forward_s > 0 ? p.flops.forward * passes / p.forward_s / 1e9 : 0.0;
    std::cout << l.dump() << "\n";
  }
}

double seconds_of(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void bench_infer(const BenchInferArgs& a) {
  if (a.passes < 1 || a.warmup < 0 || a.batch < 1)
    throw_usage("bench infer: --passes >= 1, --warmup >= 0, --batch >= 1");
  const BuiltModel m = build_model(bench_model_config(a));
  const auto comm = make_world_communicator(WorldOptions{});
  const HybridGroups groups =
      make_hybrid_groups(*comm, a.spatial, "bench infer: --spatial",
                         parse_halo_overlap(a.halo_overlap, "bench infer: --halo-overlap"));
  SessionOptions so = bench_session_options(a, Purpose::inference, a.batch, comm->local_size());
  so.spatial = groups.split;
  const Session session(m.graph, so);
  Backend& backend = session.backend();
  Executor& ex = session.executor();
  const int threads = session.threads();
  const double compile_s = session.compile_seconds();
  fill_random_batch(ex, m, backend);
  for (int i = 0; i < a.warmup; ++i) ex.forward(false);
  ex.set_profiling(a.profile);
  std::vector<double> times;
  times.reserve(static_cast<size_t>(a.passes));
  for (int i = 0; i < a.passes; ++i) times.push_back(seconds_of([&] { ex.forward(false); }));
  std::sort(times.begin(), times.end());
  // A split pass is done when the group's slowest rank is; data-parallel ranks count alike.
  const double best = comm->allreduce_max(times.front());
  const double median = comm->allreduce_max(times[times.size() / 2]);
  const double rss = comm->allreduce_max(peak_rss_mb());
  if (comm->rank() != 0) return;
  const int64_t samples = a.batch * groups.data_parallel;  // per pass, the job's
  nlohmann::json j =
      bench_json_head("infer", a, backend, enum_name(so.precision), a.batch, threads);
  j["passes"] = a.passes;
  j["latency_ms_min"] = best * 1e3;
  j["latency_ms_median"] = median * 1e3;
  j["samples_per_s"] = static_cast<double>(samples) / best;
  j["gflops"] = ex.forward_flops() * comm->size() / best / 1e9;
  j["compile_s"] = compile_s;
  j["arena_mb"] = static_cast<double>(ex.plan().arena_bytes) / (1 << 20);
  j["params_mb"] = static_cast<double>(ex.params().bytes()) / (1 << 20);
  j["peak_rss_mb"] = rss;  // per rank, the largest
  if (comm->size() > 1) j["ranks"] = comm->size();
  if (groups.split) {
    j["spatial"] = spatial_text(a.spatial);
    j["data_parallel"] = groups.data_parallel;
  }
  std::cout << j.dump() << std::endl;
  if (a.profile) print_profile(ex, a.passes);
}

}  // namespace

void register_bench_infer(CLI::App& bench) {
  auto a = std::make_shared<BenchInferArgs>();
  CLI::App* cmd = bench.add_subcommand(
      "infer", "time inference passes on random data (forward only, batch norm folded)");
  add_model_options(*cmd, *a);
  cmd->add_option("--batch", a->batch, "batch size");
  cmd->add_option("--passes", a->passes, "timed passes (the best is reported)");
  cmd->add_option("--warmup", a->warmup, "untimed passes first");
  cmd->add_option("--threads", a->threads,
                  std::string("compute threads per rank (") + kDefaultThreadsHelp + ")");
  cmd->add_option("--backend", a->backend, "a registered backend (default: the fastest built)");
  cmd->add_option("--precision", a->precision, "float32, bf16 or fp16");
  cmd->add_flag("--profile", a->profile, "also print per-layer times");
  cmd->add_option("--spatial", a->spatial,
                  "under mpirun: split each sample among this many ranks per spatial axis "
                  "(d,h,w for CosmoFlow), as dist.spatial")
      ->delimiter(',');
  cmd->add_option("--halo-overlap", a->halo_overlap,
                  "with --spatial: auto, always or off, as dist.halo_overlap");
  cmd->add_flag("--autotune", a->autotune,
                "choose each convolution's layouts by timing the candidates (crest.autotune)");
  cmd->callback([a] { bench_infer(*a); });
}

}  // namespace crest::tools
