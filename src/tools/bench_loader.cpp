// crest bench loader --config FILE [overrides] [--epochs E] [--threads T]: how fast the data path
// of a config is, stage by stage, on the config's own files:
//   raw_read   plain sequential read of the files (the disk's rate: the ceiling for uncompressed
//              data), one thread
//   inflate    gzip inflate + record CRCs from memory, one thread (0 for plain files)
//   decode     Example parse + checks + int16->float32 (+ log1p), one thread
//   end_to_end the DataLoader with its threads and prefetch, epochs back to back
// Each file's page-cache pages are dropped (posix_fadvise DONTNEED) before the raw read and
// before each end-to-end epoch, so reads come from the device unless --warm is given.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "crest/core/error.hpp"
#include "crest/data/formats/tfrecord.hpp"
#include "crest/data/loader.hpp"
#include "crest/dist/communicator.hpp"
#include "crest/train/config.hpp"
#include "crest/train/training_data.hpp"
#include "commands.hpp"

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

struct Args {
  std::string config;
  std::vector<std::string> overrides;
  int epochs = 2;
  int threads = 0;
  bool warm = false;
};

void bench_loader(const Args& a) {
  if (a.config.empty()) throw_usage("bench loader needs --config FILE");
  const Config config = load_config(a.config, a.overrides);
  auto comm = make_single_process_communicator();
  const TrainingData data = open_training_data(config, *comm, std::cerr);
  const SampleSource& src = *data.train;
  const int64_t n = src.size();
  const SampleSpec& spec = src.spec();
  nlohmann::json out;
  out["bench"] = "loader";
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
  DataLoader dl(data.train, lo, *comm);
  double best = 0, total_s = 0;
  int64_t total_samples = 0, payload_total = 0;
  for (int e = 0; e < a.epochs; ++e) {
    if (files && !a.warm)
      for (int64_t i = 0; i < n; ++i) drop_cache(src.path(i));
    const auto t0 = Clock::now();
    dl.start_epoch(e);
    for (int64_t b = 0; b < dl.plan().batches; ++b) dl.release(dl.next());
    const double s = since(t0);
    total_s += s;
    total_samples += dl.stats().samples;
    payload_total += dl.stats().payload_bytes;
    best = std::max(best, static_cast<double>(dl.stats().samples) / s);
  }
  out["threads"] = dl.threads();
  out["epochs"] = a.epochs;
  out["samples_per_s"] = best;
  out["samples_per_s_mean"] = static_cast<double>(total_samples) / total_s;
  out["end_to_end_mb_s"] =
      static_cast<double>(payload_total) / 1e6 / total_s;  // decompressed bytes
  out["cold_cache"] = files && !a.warm;
  std::cout << out.dump() << std::endl;
}

}  // namespace

void register_bench_loader(CLI::App& bench) {
  auto a = std::make_shared<Args>();
  CLI::App* cmd = bench.add_subcommand(
      "loader", "time the data path of a config: read, inflate, decode, end to end");
  cmd->add_option("--config,-c", a->config, "config file whose data section is measured")
      ->required();
  cmd->add_option("overrides", a->overrides, "key.path=value overrides");
  cmd->add_option("--epochs", a->epochs, "end-to-end epochs (best is reported)");
  cmd->add_option("--threads", a->threads,
                  "reader threads (default: data.n_parallel_reads or automatic)");
  cmd->add_flag("--warm", a->warm,
                "keep the files in the page cache (default: drop them before reading)");
  cmd->callback([a] { bench_loader(*a); });
}

}  // namespace crest::tools
