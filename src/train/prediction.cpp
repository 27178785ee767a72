#include "crest/train/prediction.hpp"

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <optional>
#include <ostream>
#include <sstream>

#include "batch_ahead.hpp"
#include "crest/core/error.hpp"
#include "crest/data/formats/prediction_file.hpp"
#include "crest/dist/communicator.hpp"
#include "crest/engine/session.hpp"
#include "crest/engine/trained_weights.hpp"
#include "crest/spatial/hybrid_groups.hpp"
#include "crest/train/batch_feed.hpp"
#include "crest/train/task.hpp"
#include "crest/train/trainer.hpp"
#include "crest/train/training_data.hpp"
#include "prediction_rows.hpp"

namespace crest {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Refused before any work: an existing output without --overwrite, a directory we cannot write.
void check_output(const std::string& out, bool overwrite) {
  if (out.empty()) throw_usage("crest predict needs --out FILE.h5");
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(out, ec)) throw_input(out + ": is a directory; --out names a file");
  if (fs::exists(out, ec) && !overwrite)
    throw_input(out +
                ": exists; --overwrite replaces it (the old file stays until the new one is "
                "complete)");
  const fs::path dir = fs::absolute(out).parent_path();
  if (!fs::is_directory(dir, ec))
    throw_input(out + ": its directory " + dir.string() + " is missing");
  if (::access(dir.c_str(), W_OK) != 0)
    throw_input(out + ": cannot write into " + dir.string() + " (" + errno_text(errno) + ")");
}

size_t longest_path(const SampleSource& source) {
  size_t n = 0;
  for (int64_t i = 0; i < source.size(); ++i) n = std::max(n, source.path(i).size());
  return n;
}

LoaderOptions prediction_loader_options(const Config& config, bool skip_bad) {
  LoaderOptions lo = loader_options(config.data);
  lo.shuffle = false;
  lo.order = TrainOrder::crest;  // sorted: crest's order unshuffled
  lo.cache_bytes = 0;
  lo.every_sample = true;  // every file gets its row, whatever the batch and the ranks
  lo.skip_bad_samples = skip_bad;
  return lo;
}

// Rank 0's progress line, at most every few seconds.
class Progress {
 public:
  Progress(std::ostream* log, int64_t total) : log_(log), total_(total) {}
  void update(int64_t done_here, int ranks, int64_t bytes_here) {
    if (!log_ || since(last_) < 5.0) return;
    last_ = Clock::now();
    const double s = since(start_);
    const auto done = static_cast<double>(done_here * ranks);
    *log_ << "predict: ~" << std::min(total_, done_here * ranks) << "/" << total_ << " samples | "
          << std::fixed << std::setprecision(1) << done / s << " samples/s | "
          << std::setprecision(3) << static_cast<double>(bytes_here) * ranks / s / 1e9
          << " GB/s read\n"
          << std::defaultfloat << std::flush;
  }

 private:
  std::ostream* log_;
  int64_t total_;
  Clock::time_point start_ = Clock::now(), last_ = Clock::now();
};

struct Totals {
  std::vector<double> metric_sums;
  int64_t samples = 0;
};

// Where the next batch is read while this one is fed: on a device, whose copy of it then runs
// during this forward pass (host memory gains nothing from it).
bool reads_ahead(Executor& ex) { return !ex.backend().memory().is_host(); }

// `writer` null: this rank predicts with its spatial group but another rank of it writes.
void predict_batches(Executor& ex, BatchFeed& feed, DataLoader& loader, PredictionRows& rows,
                     PredictionFileWriter* writer, Totals& totals, Progress& progress, int shards) {
  loader.start_epoch(0);
  BatchAhead ahead(loader, &feed);
  for (int64_t b = 0; b < loader.plan().batches; ++b) {
    const LoadedBatch batch = ahead.take();
    feed.feed(batch);
    if (reads_ahead(ex) && b + 1 < loader.plan().batches) ahead.read();
    ex.forward(false);
    const TensorView pred = feed.host_prediction();
    for (size_t place = 0; place < batch.present.size(); ++place) {
      if (!batch.present[place]) continue;
      const int64_t id = batch.sample_ids[place];
      const auto& row = rows.row(pred, batch.target, static_cast<int64_t>(place),
                                 loader.source().path(id), id, totals.metric_sums);
      if (writer) writer->append(row);
      ++totals.samples;
    }
    ahead.release(batch);
    progress.update(totals.samples, shards, loader.stats().payload_bytes);
  }
}

std::vector<MetricValue> metric_values(const Task& task, const std::vector<double>& sums) {
  std::vector<MetricValue> out;
  size_t at = 0;
  for (const Metric* m : task.metrics) {
    out.push_back({m->short_name, m->value(&sums[at])});
    at += static_cast<size_t>(m->sums);
  }
  return out;
}

PredictionAttributes attributes_of(const Config& config, const PredictOptions& o,
                                   const PredictSummary& s) {
  PredictionAttributes a;
  a.texts = {{"crest_version", CREST_VERSION},
             {"model", config.model.name},
             {"config", config.source},
             {"weights", o.weights.empty() ? o.checkpoint : o.weights},
             {"split", o.split},
             {"precision", enum_name(config.crest.precision)}};
  a.numbers = {{"samples", static_cast<double>(s.samples)},
               {"skipped", static_cast<double>(s.skipped)}};
  for (const MetricValue& m : s.metrics) a.numbers.emplace_back(m.name, m.value);
  return a;
}

// Rank 0's index of the shards' part files, once every part is complete (collective over the
// world; `shards` gathers the parts' row counts).
void write_index(const std::string& out, Communicator& world, Communicator& shards, int64_t my_rows,
                 const std::vector<ColumnSpec>& columns, const PredictionAttributes& attributes,
                 PredictSummary& s) {
  const std::vector<std::vector<std::byte>> counts = shards.allgather_parts(
      std::vector<std::byte>(reinterpret_cast<const std::byte*>(&my_rows),
                             reinterpret_cast<const std::byte*>(&my_rows + 1)));
  std::vector<std::string> parts;
  std::vector<int64_t> part_rows;
  for (int r = 0; r < shards.size(); ++r) {
    const std::string path = prediction_part_path(out, r, shards.size());
    parts.push_back(std::filesystem::path(path).filename().string());
    int64_t n = 0;
    std::memcpy(&n, counts[static_cast<size_t>(r)].data(), sizeof n);
    part_rows.push_back(n);
    s.files_written.push_back(path);
  }
  if (world.rank() == 0) write_prediction_index(out, parts, part_rows, columns, attributes);
  world.barrier();
}

void print_summary(std::ostream& log, const PredictSummary& s, const std::string& out) {
  log << "predict: " << s.samples << " samples";
  if (s.skipped) log << " (" << s.skipped << " bad files skipped)";
  log << " in " << std::fixed << std::setprecision(2) << s.seconds << " s | "
      << std::setprecision(2) << s.samples_per_s << " samples/s | " << std::setprecision(3)
      << s.read_bytes_per_s / 1e9 << " GB/s read" << std::defaultfloat;
  log << std::setprecision(6);
  for (const MetricValue& m : s.metrics) log << " | " << m.name << " " << m.value;
  log << "\npredict: wrote " << out;
  if (s.files_written.size() > 1)
    log << " (an index of " << s.files_written.size() - 1 << " part files beside it)";
  log << "\n";
}

}  // namespace

std::string prediction_part_path(const std::string& out, int rank, int ranks) {
  return out + ".part" + std::to_string(rank) + "-of-" + std::to_string(ranks);
}

PredictSummary run_prediction(const Config& config, const PredictOptions& o, std::ostream& log) {
  WorldOptions wo;
  wo.backend = config.dist.backend;
  wo.timeout_s = config.dist.timeout_s;
  const std::unique_ptr<Communicator> comm = make_world_communicator(wo);
  const int rank = comm->rank();
  std::ostream* rank0_log = rank == 0 ? &log : nullptr;
  // dist.spatial: each group of ranks predicts one sample together and its first rank writes
  // the rows; the groups shard the samples (docs/distributed.md, "Spatial split").
  const std::vector<int64_t>& parts = config.dist.spatial;
  const HybridGroups groups =
      make_hybrid_groups(*comm, std::vector<int>(parts.begin(), parts.end()), "dist.spatial",
                         parse_halo_overlap(config.dist.halo_overlap, "dist.halo_overlap"));
  Communicator& shards = groups.data_comm(*comm);
  const bool writes = !groups.spatial || groups.spatial->rank() == 0;
  check_output(o.out, o.overwrite);
  const Task task = make_task(config);
  // Inference programs run forward only, so only forward is timed; no record (nothing resumes).
  SessionOptions so;
  so.backend = config.crest.backend;
  so.threads = compute_threads_per_rank(config, comm->local_size());
  so.layout_tuning.emplace().measure = config.crest.autotune;
  so.purpose = Purpose::inference;
  so.precision = config.crest.precision;
  so.batch = config.data.batch_size;
  so.spatial = groups.split;
  const MemoryLimit limit = memory_limit_per_rank(config, comm->local_size());
  so.memory_limit = limit.bytes;
  so.memory_limit_source = limit.source;
  so.memory_limit_set = limit.set;
  so.stages_batches = true;  // on a device it reads ahead (reads_ahead)
  const Session session(task.model.graph, so);
  Executor& ex = session.executor();
  load_trained_weights(ex.params(), task.model.external_params, o.checkpoint, o.weights);
  std::ostringstream quiet;
  const std::shared_ptr<SampleSource> source =
      open_split(config, *comm, rank == 0 ? log : quiet, o.split);
  LoaderOptions lo = prediction_loader_options(config, o.skip_bad);
  lo.sample_dtype = loader_sample_dtype(ex, task.model);
  lo.batch_memory = &ex.backend().memory().staging_memory();  // page-locked for a GPU
  lo.held = reads_ahead(ex) ? 2 : 1;
  DataLoader loader(source, lo, shards);
  BatchFeed feed(ex, task.model);
  PredictionRows rows(task, ex.output(task.model.prediction).desc(),
                      ex.input(task.model.target_input).desc(), longest_path(*source),
                      o.probabilities);
  const std::string mine =
      shards.size() == 1 ? o.out : prediction_part_path(o.out, shards.rank(), shards.size());
  std::optional<PredictionFileWriter> writer;
  if (writes) writer.emplace(mine, rows.columns());

  Totals totals;
  size_t sums = 0;
  for (const Metric* m : task.metrics) sums += static_cast<size_t>(m->sums);
  totals.metric_sums.assign(sums, 0.0);
  Progress progress(rank0_log, source->size());
  const auto t0 = Clock::now();
  predict_batches(ex, feed, loader, rows, writer ? &*writer : nullptr, totals, progress,
                  shards.size());

  for (int64_t bad : writes ? loader.bad_samples() : std::vector<int64_t>{})
    std::cerr << "predict: skipped the bad sample file " << source->path(bad) << "\n";
  PredictSummary s;
  s.seconds = comm->allreduce_max(since(t0));
  std::vector<double> job = totals.metric_sums;
  job.push_back(static_cast<double>(totals.samples));
  job.push_back(static_cast<double>(loader.stats().skipped));
  job.push_back(static_cast<double>(loader.stats().payload_bytes));
  shards.allreduce_sum(job.data(), job.size());  // each sample once
  s.read_bytes_per_s = job.back() / s.seconds;
  job.pop_back();
  s.skipped = static_cast<int64_t>(job.back());
  job.pop_back();
  s.samples = static_cast<int64_t>(job.back());
  job.pop_back();
  s.samples_per_s = static_cast<double>(s.samples) / s.seconds;
  s.metrics = metric_values(task, job);
  const PredictionAttributes attributes = attributes_of(config, o, s);
  if (writer) writer->commit(attributes);
  s.files_written.push_back(o.out);
  if (shards.size() > 1)
    write_index(o.out, *comm, shards, totals.samples, rows.columns(), attributes, s);
  else if (comm->size() > 1)
    comm->barrier();  // the group's writer is done before any rank returns
  if (rank == 0) print_summary(log, s, o.out);
  return s;
}

}  // namespace crest
