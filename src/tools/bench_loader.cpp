// crest bench loader --data DIR | --config FILE [overrides] [--epochs E] [--threads T]: how fast
// the data path is, stage by stage, on a dataset's own files:
//   raw_read   plain sequential read of the files (the disk's rate: the ceiling for uncompressed
//              data), one thread
//   inflate    gzip inflate + record CRCs from memory, one thread (0 for plain files)
//   decode     Example parse + checks + int16->float32 (+ log1p), one thread
//   end_to_end the DataLoader with its threads and prefetch, epochs back to back
// Each file's page-cache pages are dropped (posix_fadvise DONTNEED) before the raw read and
// before each end-to-end epoch, so reads come from the device unless --warm is given.
// With --data DIR (a dataset root as `crest datagen` writes it) the data section is inferred from
// the files: format, compression, sample shape, targets and the training file count; --config
// is then optional and overrides still win. With --spatial d,h,w one more line per rank of a
// spatial group gives what that rank reads of each sample under dist.spatial (its block: only
// the block's bytes from npy and DeepCAM HDF5 files, the whole record from TFRecords and
// fused DeepCAM npy files) and how fast.
//
// Under mpirun every process measures its own data path, all at once (contending for the file
// system as a job's ranks do), each line naming its rank; data.stage_dir is staged once for all
// of them, as crest train stages it.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "commands.hpp"
#include "crest/core/error.hpp"
#include "crest/core/whole_lines.hpp"
#include "crest/data/formats/example.hpp"
#include "crest/data/formats/inspect.hpp"
#include "crest/data/formats/npy.hpp"
#include "crest/data/formats/tfrecord.hpp"
#include "crest/data/loader.hpp"
#include "crest/data/sample_source.hpp"
#include "crest/dist/communicator.hpp"
#include "crest/spatial/decomposition.hpp"
#include "crest/train/config.hpp"
#include "crest/train/training_data.hpp"

namespace crest::tools {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

void drop_cache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  (void)::fdatasync(fd);
  (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

// Reads the whole file with large sequential reads; returns the bytes.
int64_t read_file(const std::string& path, std::vector<std::byte>& buf,
                  std::vector<std::byte>* keep) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_input(path + ": cannot open");
  int64_t total = 0;
  if (keep) keep->clear();
  for (ssize_t n; (n = ::read(fd, buf.data(), buf.size())) > 0;) {
    total += n;
    if (keep) keep->insert(keep->end(), buf.begin(), buf.begin() + n);
  }
  ::close(fd);
  return total;
}

// What the files of <root>/train say about the data section (CosmoFlow datasets: TFRecord or
// NVIDIA's npy, as `crest datagen cosmoflow` writes them).
struct DatasetFacts {
  bool npy = false;
  bool gzip = false;
  std::vector<int64_t> sample_shape;  // [D, H, W, C]
  int64_t targets = 0;
  int64_t n_train = 0;
};

std::vector<int64_t> npy_shape(const std::string& path) { return read_npy_header(path).shape; }

DatasetFacts inspect_dataset(const std::string& root) {
  namespace fs = std::filesystem;
  const std::string dir = root + "/train";
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw_input(root +
                ": no train/ directory in it (--data takes a dataset root as crest datagen "
                "cosmoflow writes it: train/ and validation/ with one sample per file)");
  const std::vector<std::string> files = list_sample_files(dir, {".tfrecord", ".data.npy"});
  auto is_npy = [](const std::string& f) { return f.ends_with(".data.npy"); };
  const auto npy = std::count_if(files.begin(), files.end(), is_npy);
  if (npy != 0 && npy != static_cast<int64_t>(files.size()))
    throw_input(
        dir +
        ": holds both .tfrecord and .data.npy files; use --config FILE (data.format) instead "
        "of --data");
  DatasetFacts f;
  f.npy = npy != 0;
  f.n_train = static_cast<int64_t>(files.size());
  const std::string& first = files.front();
  if (f.npy) {
    f.sample_shape = npy_shape(first);
    const std::vector<int64_t> y =
        npy_shape(first.substr(0, first.size() - 9) + ".label.npy");  // <stem>.label.npy
    if (f.sample_shape.size() != 4 || y.size() != 1)
      throw_input(first + ": expected int16 [D, H, W, C] data and a [targets] label file");
    f.targets = y[0];
    return f;
  }
  f.gzip = detect_data_file_format(first) == DataFileFormat::tfrecord_gzip;
  TfRecordReader reader(first, f.gzip ? TfRecordCompression::gzip : TfRecordCompression::none);
  std::vector<std::byte> record;
  if (!reader.next(record)) throw_input(first + ": holds no record");
  const ExampleView ex = ExampleView::parse(record, first);
  const ExampleFeature& x = ex.at("x", ExampleFeature::Kind::bytes);
  if (x.bytes.size() != 1) throw_input(first + ": feature 'x' is not one bytes value");
  // int16 [D, D, D, 4], as the reference data and crest datagen store it.
  const size_t bytes = x.bytes[0].size();
  const auto d = static_cast<int64_t>(std::llround(std::cbrt(static_cast<double>(bytes) / 8.0)));
  if (d < 1 || static_cast<size_t>(d * d * d * 8) != bytes)
    throw_input(first + ": 'x' holds " + std::to_string(bytes) +
                " bytes, not an int16 cube of 4 channels; use --config FILE (data.sample_shape) "
                "instead of --data");
  f.sample_shape = {d, d, d, 4};
  f.targets = static_cast<int64_t>(ex.at("y", ExampleFeature::Kind::floats).floats.size());
  return f;
}

std::string shape_value(const std::vector<int64_t>& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? "," : "") + std::to_string(s[i]);
  return t + "]";
}

// Without --config: the smallest config whose data section the loader reads the way training
// would (the reference's preprocessing: apply_log), batches of 4 (fewer for a tinier dataset).
// The model section only has to validate against the sample shape: the loader never builds it.
std::string builtin_config(const DatasetFacts& f) {
  int pools = 5;  // the reference network's; fewer when the volume does not divide by 2^5
  for (size_t i = 0; i < 3; ++i)
    while (pools > 1 && f.sample_shape[i] % (int64_t{1} << pools) != 0) --pools;
  return "data:\n  name: cosmo\n  data_dir: unset\n  n_train: 1\n  batch_size: " +
         std::to_string(std::min<int64_t>(4, f.n_train)) +
         "\n  n_epochs: 1\n  sample_shape: " + shape_value(f.sample_shape) +
         "\n  apply_log: true\nmodel:\n  name: cosmoflow\n  n_conv_layers: " +
         std::to_string(pools) + "\noptimizer:\n  name: SGD\n";
}

// The data section as the files have it, applied before the user's own overrides.
std::vector<std::string> dataset_overrides(const std::string& root, const DatasetFacts& f) {
  return {"data.name=cosmo",
          "data.data_dir=" + nlohmann::json(root).dump(),  // a quoted YAML string
          std::string("data.format=") + (f.npy ? "npy" : "tfrecord"),
          std::string("data.compression=") + (f.gzip ? "GZIP" : "null"),
          "data.sample_shape=" + shape_value(f.sample_shape),
          "model.target_size=" + std::to_string(f.targets),
          "data.target_shape=[" + std::to_string(f.targets) + "]",
          "data.n_train=" + std::to_string(f.n_train),
          "data.n_valid=0"};  // the bench reads the training split only
}

struct Args {
  std::string config;
  std::string data;
  std::vector<std::string> overrides;
  int epochs = 2;
  int threads = 0;
  bool warm = false;
  std::vector<int> spatial;  // a spatial group's parts per axis; empty: none
};

// One pass over the loader's epochs: the best samples/s and the payload bytes read per sample
// (files decompressed; a block's where the source reads blocks).
struct LoaderPass {
  double best_samples_s = 0, mean_samples_s = 0, payload_bytes_per_sample = 0;
  int threads = 0;
};

LoaderPass run_loader(const std::shared_ptr<const SampleSource>& source, const LoaderOptions& lo,
                      Communicator& comm, int epochs, bool drop) {
  DataLoader dl(source, lo, comm);
  double total_s = 0;
  int64_t total_samples = 0, payload_total = 0;
  LoaderPass pass;
  for (int e = 0; e < epochs; ++e) {
    if (drop)
      for (int64_t i = 0; i < source->size(); ++i) drop_cache(source->path(i));
    const auto t0 = Clock::now();
    dl.start_epoch(e);
    for (int64_t b = 0; b < dl.plan().batches; ++b) dl.release(dl.next());
    const double s = since(t0);
    total_s += s;
    total_samples += dl.stats().samples;
    payload_total += dl.stats().payload_bytes;
    pass.best_samples_s =
        std::max(pass.best_samples_s, static_cast<double>(dl.stats().samples) / s);
  }
  pass.threads = dl.threads();
  pass.mean_samples_s = static_cast<double>(total_samples) / total_s;
  pass.payload_bytes_per_sample =
      static_cast<double>(payload_total) / static_cast<double>(std::max<int64_t>(total_samples, 1));
  return pass;
}

// Group rank r's block of samples of channels-last shape `x` (numpy.array_split blocks over the
// grid, as dist.spatial splits them).
SampleBlock block_of_rank(const SpatialGrid& grid, int r, const Shape& x) {
  SampleBlock b;
  const std::vector<int> c = grid.coords(r);
  for (size_t a = 0; a < grid.parts.size(); ++a) {
    const IndexRange rows = block_range(x[static_cast<int>(a)], grid.parts[a], c[a]);
    b.begin.push_back(rows.begin);
    b.end.push_back(rows.end);
  }
  return b;
}

// One line per rank of a spatial group: its block, the bytes it reads per sample and its rate.
void bench_blocks(const Args& a, const std::shared_ptr<SampleSource>& whole,
                  const LoaderOptions& lo, Communicator& comm, double whole_bytes_per_sample) {
  const SpatialGrid grid{a.spatial};
  const Shape x = whole->spec().x_shape;
  if (grid.parts.size() + 1 != static_cast<size_t>(x.rank()))
    throw_usage("bench loader: --spatial gives " + std::to_string(grid.parts.size()) +
                " parts, but the samples " + x.str() + " have " + std::to_string(x.rank() - 1) +
                " spatial axes");
  for (int r = 0; r < grid.size(); ++r) {
    const SampleBlock block = block_of_rank(grid, r, x);
    const auto part = block_of_samples(whole, block);
    const LoaderPass pass = run_loader(part, lo, comm, a.epochs, !a.warm);
    nlohmann::json j;
    j["bench"] = "loader";
    j["spatial"] = a.spatial;
    j["group_rank"] = r;
    j["block_begin"] = block.begin;
    j["block_end"] = block.end;
    j["reads_only_block"] = part->reads_blocks();
    j["payload_bytes_per_sample"] = pass.payload_bytes_per_sample;
    j["fraction_of_whole"] = pass.payload_bytes_per_sample / whole_bytes_per_sample;
    j["samples_per_s"] = pass.best_samples_s;
    std::cout << j.dump() << std::endl;
  }
}

Config bench_config(const Args& a) {
  if (a.data.empty()) {
    if (a.config.empty())
      throw_usage(
          "bench loader needs --data DIR (a dataset, e.g. from crest datagen) or --config FILE");
    return load_config(a.config, a.overrides);
  }
  const DatasetFacts facts = inspect_dataset(a.data);
  std::vector<std::string> overrides = dataset_overrides(a.data, facts);
  overrides.insert(overrides.end(), a.overrides.begin(), a.overrides.end());
  if (a.config.empty())
    return load_config_text(builtin_config(facts), "<bench loader --data " + a.data + ">",
                            overrides);
  return load_config(a.config, overrides);
}

void bench_loader(const Args& a) {
  const Config config = bench_config(a);
  const auto world = make_world_communicator(WorldOptions{});
  auto comm = make_single_process_communicator();
  WholeLines log(std::cerr);  // the ranks' reports share a pipe with their JSON lines
  const TrainingData data = open_training_data(config, *world, log);
  const SampleSource& src = *data.train;
  const int64_t n = src.size();
  const SampleSpec& spec = src.spec();
  nlohmann::json out;
  out["bench"] = "loader";
  out["rank"] = world->rank();
  out["ranks"] = world->size();
  out["format"] = src.format();
  out["samples"] = n;
  out["sample_shape"] = spec.x_shape.to_vector();

  // 256 KiB reads: the fastest plain read loop on the development VM (an 8 MiB buffer no longer
  // fits the L2 cache and reads 2-4x slower), so the raw figure is the honest ceiling.
  std::vector<std::byte> buf(size_t{256} << 10), file_bytes, payload;
  std::vector<float> x(static_cast<size_t>(spec.x_shape.numel())),
      y(static_cast<size_t>(spec.y_shape.numel()));
  const bool files = src.format() != "dummy";
  if (files) {
    // 1. Raw sequential read of every file.
    int64_t bytes = 0;
    if (!a.warm)
      for (int64_t i = 0; i < n; ++i) drop_cache(src.path(i));
    auto t0 = Clock::now();
    for (int64_t i = 0; i < n; ++i) bytes += read_file(src.path(i), buf, nullptr);
    const double raw_s = since(t0);
    out["file_bytes"] = bytes;
    out["raw_read_mb_s"] = static_cast<double>(bytes) / 1e6 / raw_s;
    // 2. Inflate (+ CRCs) from memory and 3. decode, one thread, on up to 16 files.
    const int64_t m = std::min<int64_t>(n, 16);
    double inflate_s = 0, decode_s = 0;
    int64_t inflated = 0, compressed = 0;
    for (int64_t i = 0; i < m; ++i) {
      read_file(src.path(i), buf, &file_bytes);
      compressed += static_cast<int64_t>(file_bytes.size());
      t0 = Clock::now();
      src.read(i, payload);  // from the page cache now: this is the inflate + CRC cost
      inflate_s += since(t0);
      inflated += static_cast<int64_t>(payload.size());
      t0 = Clock::now();
      src.decode(i, payload, x.data(), y.data());
      decode_s += since(t0);
    }
    out["inflate_mb_s"] =
        static_cast<double>(inflated) / 1e6 / inflate_s;  // uncompressed bytes out
    out["compression_ratio"] = static_cast<double>(inflated) / static_cast<double>(compressed);
    out["decode_samples_s"] = static_cast<double>(m) / decode_s;
    out["decode_mb_s"] = static_cast<double>(inflated) / 1e6 / decode_s;
  }
  // 4. End to end through the loader.
  LoaderOptions lo = loader_options(config.data);
  if (a.threads > 0) lo.threads = a.threads;
  const LoaderPass pass = run_loader(data.train, lo, *comm, a.epochs, files && !a.warm);
  out["threads"] = pass.threads;
  out["epochs"] = a.epochs;
  out["samples_per_s"] = pass.best_samples_s;
  out["samples_per_s_mean"] = pass.mean_samples_s;
  out["end_to_end_mb_s"] = pass.mean_samples_s * pass.payload_bytes_per_sample / 1e6;
  out["payload_bytes_per_sample"] = pass.payload_bytes_per_sample;
  out["cold_cache"] = files && !a.warm;
  std::cout << out.dump() << std::endl;
  if (!a.spatial.empty()) bench_blocks(a, data.train, lo, *comm, pass.payload_bytes_per_sample);
}

}  // namespace

void register_bench_loader(CLI::App& bench) {
  auto a = std::make_shared<Args>();
  CLI::App* cmd = bench.add_subcommand(
      "loader", "time the data path of a config: read, inflate, decode, end to end");
  cmd->add_option("--data,-d", a->data,
                  "dataset root (train/, validation/), e.g. from crest datagen: format, "
                  "compression, sample shape and file count are read from its files");
  cmd->add_option("--config,-c", a->config,
                  "config file whose data section is measured (with --data: the rest of it)");
  cmd->add_option("overrides", a->overrides, "key.path=value overrides");
  cmd->add_option("--epochs", a->epochs, "end-to-end epochs (best is reported)");
  cmd->add_option("--threads", a->threads,
                  "reader threads (default: data.n_parallel_reads or automatic)");
  cmd->add_flag("--warm", a->warm,
                "keep the files in the page cache (default: drop them before reading)");
  cmd->add_option("--spatial", a->spatial,
                  "also each rank of a spatial group of this many parts per axis (d,h,w): the "
                  "block it reads of every sample, its bytes and rate")
      ->delimiter(',');
  cmd->callback([a] { bench_loader(*a); });
}

}  // namespace crest::tools
