#include "crest/data/datagen.hpp"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <ostream>
#include <vector>

#include "crest/core/cpus.hpp"
#include "crest/core/error.hpp"
#include "crest/core/hash_rng.hpp"
#include "crest/core/parallel_for.hpp"
#include "crest/core/progress.hpp"
#include "crest/core/units.hpp"
#include "crest/data/data_family.hpp"

namespace crest {
namespace {
namespace fs = std::filesystem;

// Train and validation samples come from different seeds, so growing one split never changes
// the other.
uint64_t split_seed(uint64_t seed, int split) {
  return seed + rng::kGoldenGamma * static_cast<uint64_t>(split + 1);
}

struct Job {
  int split;  // 0 train, 1 validation
  int64_t index;
};

// The options every family shares, then the family's own. `o.format` is resolved.
void check_options(const DataFamily& family, const DatagenOptions& o) {
  if (o.out.empty()) throw_usage("datagen: --out DIR is required");
  if (o.n_train < 0 || o.n_valid < 0)
    throw_usage("datagen: --train and --valid must not be negative");
  if (o.n_train + o.n_valid == 0) throw_usage("datagen: nothing to generate (--train 0 --valid 0)");
  if (std::find(family.formats.begin(), family.formats.end(), o.format) == family.formats.end()) {
    std::string formats;
    for (size_t i = 0; i < family.formats.size(); ++i)
      formats += (i == 0 ? "" : i + 1 == family.formats.size() ? " or " : ", ") + family.formats[i];
    throw_usage("datagen " + family.name + ": --format must be " + formats + ", got '" + o.format +
                "'");
  }
  if (family.check_options) family.check_options(o);
}

// Refuses to write into a split directory that already holds files, unless overwrite is set.
void prepare_dir(const std::string& dir, bool overwrite) {
  std::error_code ec;
  if (fs::exists(dir, ec) && !overwrite && !fs::is_empty(dir, ec))
    throw_input(dir +
                ": exists and is not empty; refusing to write over it (pass --overwrite to replace "
                "the files)");
  fs::create_directories(dir, ec);
  if (ec) throw_input(dir + ": cannot create the directory: " + ec.message());
}

DatagenOptions resolved(const DatagenOptions& options, const DataFamily& family) {
  DatagenOptions o = options;
  if (o.format.empty()) o.format = family.formats.front();
  return o;
}

}  // namespace

std::string datagen_file_name(const DatagenOptions& options, int64_t index) {
  const DataFamily& family = find_data_family(options.family);
  return family.file_name(resolved(options, family), index);
}

DatagenResult generate_dataset(const DatagenOptions& options, std::ostream& log) {
  const DataFamily& family = find_data_family(options.family);
  const DatagenOptions o = resolved(options, family);
  check_options(family, o);
  const std::string dirs[2] = {(fs::path(o.out) / "train").string(),
                               (fs::path(o.out) / "validation").string()};
  const int64_t counts[2] = {o.n_train, o.n_valid};
  for (const std::string& name : family.root_files)
    if (!o.overwrite && fs::exists(fs::path(o.out) / name))
      throw_input((fs::path(o.out) / name).string() +
                  ": exists; refusing to write over it (pass --overwrite)");
  for (int s = 0; s < 2; ++s)
    if (counts[s] > 0) prepare_dir(dirs[s], o.overwrite);

  std::vector<Job> jobs;
  for (int s = 0; s < 2; ++s)
    for (int64_t i = 0; i < counts[s]; ++i) jobs.push_back({s, i});
  const int hw = usable_cpus();
  const int threads = o.threads > 0 ? o.threads : hw;
  const int workers = parallel_for_workers(jobs.size(), threads);
  // Files in parallel; the cores left over go to OpenMP inside each generator.
  const int omp_per_worker = std::max(1, hw / std::max(1, workers));
  const std::unique_ptr<DatagenRun> run = family.start(o, workers);

  log << "datagen " << family.name << ": " << o.n_train << " train + " << o.n_valid
      << " validation samples of " << run->describe() << " into " << o.out << " (" << workers
      << " parallel files, seed " << o.seed << ")\n";
  log.flush();

  Progress progress("datagen", static_cast<int64_t>(jobs.size()));
  std::atomic<int64_t> written{0};
  parallel_for(jobs.size(), threads, [&](size_t j, int worker) {
    omp_set_num_threads(omp_per_worker);  // this worker thread's share of the cores
    const Job job = jobs[j];
    const std::string path = (fs::path(dirs[job.split]) / family.file_name(o, job.index)).string();
    const int64_t bytes =
        run->write(worker, job.split, job.index, split_seed(o.seed, job.split), path);
    written += bytes;
    progress.advance(1, bytes);
  });
  written += run->finish(o.out);

  DatagenResult r;
  r.files = static_cast<int64_t>(jobs.size());
  progress.finish();
  r.bytes = written.load();
  r.seconds = progress.elapsed_s();
  log << "wrote " << r.files << " samples, " << human_bytes(static_cast<double>(r.bytes)) << " in "
      << r.seconds << " s ("
      << human_bytes(static_cast<double>(r.bytes) / std::max(r.seconds, 1e-9)) << "/s)\n";
  return r;
}

}  // namespace crest
