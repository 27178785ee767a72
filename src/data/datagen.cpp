#include "crest/data/datagen.hpp"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <ostream>
#include <vector>

#include "crest/core/error.hpp"
#include "crest/core/hash_rng.hpp"
#include "crest/core/parallel_for.hpp"
#include "crest/core/progress.hpp"
#include "crest/core/units.hpp"
#include "crest/data/datasets/deepcam_files.hpp"
#include "crest/data/formats/example.hpp"
#include "crest/data/formats/hdf5.hpp"
#include "crest/data/formats/npy.hpp"
#include "crest/data/formats/tfrecord.hpp"
#include "crest/data/synthetic/cosmoflow_generator.hpp"
#include "crest/data/synthetic/deepcam_generator.hpp"

namespace crest {
namespace {

namespace fs = std::filesystem;

// Train and validation samples come from different seeds, so growing one split never changes
// the other.
uint64_t split_seed(uint64_t seed, int split) {
  return seed + rng::kGoldenGamma * static_cast<uint64_t>(split + 1);
}

int64_t file_bytes(const std::string& path) {
  std::error_code ec;
  const auto n = fs::file_size(path, ec);
  return ec ? 0 : static_cast<int64_t>(n);
}

// Per-channel sums of one DeepCAM training file, reduced in file order afterwards so stats.h5
// has the same bits for any thread count.
struct ChannelSums {
  std::vector<double> min, max, sum, sqsum;
};

struct Job {
  int split;  // 0 train, 1 validation
  int64_t index;
};

// NVIDIA's datalabel-*.npy: float32 [H, W, 17], the label as channel 16
// (convert_hdf52fusednpy.py).
void write_fused_npy(const std::string& path, int64_t height, int64_t width,
                     const std::vector<float>& data, const std::vector<float>& labels,
                     std::vector<float>& fused) {
  const int64_t pixels = height * width;
  fused.resize(static_cast<size_t>(pixels * 17));
  for (int64_t p = 0; p < pixels; ++p) {
    std::copy_n(data.begin() + p * 16, 16, fused.begin() + p * 17);
    fused[static_cast<size_t>(p * 17 + 16)] = labels[static_cast<size_t>(p)];
  }
  write_npy(path, DType::f32, {height, width, 17}, fused.data());
}

void check_options(const DatagenOptions& o) {
  if (o.out.empty()) throw_usage("datagen: --out DIR is required");
  if (o.n_train < 0 || o.n_valid < 0)
    throw_usage("datagen: --train and --valid must not be negative");
  if (o.n_train + o.n_valid == 0) throw_usage("datagen: nothing to generate (--train 0 --valid 0)");
  if (o.kind == DatagenKind::cosmoflow) {
    if (o.size < 32 || o.size % 32)
      throw_usage("datagen: --size " + std::to_string(o.size) +
                  " must be a positive multiple of 32");
    if (o.format == DatagenFormat::hdf5)
      throw_usage("datagen cosmoflow: --format must be tfrecord or npy");
  } else {
    if (o.height < 16 || o.width < 16 || o.height % 16 || o.width % 16)
      throw_usage("datagen deepcam: --height and --width must be positive multiples of 16 (got " +
                  std::to_string(o.height) + "x" + std::to_string(o.width) + ")");
    if (o.format == DatagenFormat::tfrecord)
      throw_usage("datagen deepcam: --format must be hdf5 or npy");
    if (o.gzip) throw_usage("datagen deepcam: --gzip applies to CosmoFlow TFRecords only");
    if (o.fused && o.format != DatagenFormat::npy)
      throw_usage("datagen deepcam: --fused needs --format npy (NVIDIA's datalabel-*.npy)");
    if (o.n_train < 1)
      throw_usage("datagen deepcam: --train must be at least 1 (stats.h5 is computed over train)");
  }
  if (o.gzip && o.format != DatagenFormat::tfrecord)
    throw_usage("datagen: --gzip needs --format tfrecord");
  if (o.fused && o.kind != DatagenKind::deepcam)
    throw_usage("datagen: --fused applies to DeepCAM npy files only");
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

}  // namespace

std::string datagen_file_name(DatagenKind kind, DatagenFormat format, int64_t index, bool fused) {
  const char* pattern = "data-%06lld.h5";
  if (kind == DatagenKind::cosmoflow)
    pattern = format == DatagenFormat::npy ? "sample-%06lld.data.npy" : "sample-%06lld.tfrecord";
  else if (format == DatagenFormat::npy)
    pattern = fused ? "datalabel-%06lld.npy" : "data-%06lld.npy";
  char buf[64];
  std::snprintf(buf, sizeof buf, pattern, static_cast<long long>(index));
  return buf;
}

DatagenResult generate_dataset(const DatagenOptions& o, std::ostream& log) {
  check_options(o);
  const std::string dirs[2] = {(fs::path(o.out) / "train").string(),
                               (fs::path(o.out) / "validation").string()};
  const int64_t counts[2] = {o.n_train, o.n_valid};
  if (o.kind == DatagenKind::deepcam && !o.overwrite && fs::exists(fs::path(o.out) / "stats.h5"))
    throw_input((fs::path(o.out) / "stats.h5").string() +
                ": exists; refusing to write over it (pass --overwrite)");
  for (int s = 0; s < 2; ++s)
    if (counts[s] > 0) prepare_dir(dirs[s], o.overwrite);

  std::vector<Job> jobs;
  for (int s = 0; s < 2; ++s)
    for (int64_t i = 0; i < counts[s]; ++i) jobs.push_back({s, i});
  const int hw = hardware_threads();
  const int threads = o.threads > 0 ? o.threads : hw;
  const int workers = parallel_for_workers(jobs.size(), threads);
  // Files in parallel; the cores left over go to OpenMP inside each generator.
  const int omp_per_worker = std::max(1, hw / std::max(1, workers));

  const bool cosmo = o.kind == DatagenKind::cosmoflow;
  const CosmoflowSampleSpec cspec{o.size, 4};
  const DeepcamSampleSpec dspec{o.height, o.width, 16};
  const DeepcamChannelStats dstats = default_deepcam_channel_stats();
  std::vector<ChannelSums> sums(static_cast<size_t>(cosmo ? 0 : o.n_train));

  log << "datagen " << (cosmo ? "cosmoflow" : "deepcam") << ": " << o.n_train << " train + "
      << o.n_valid << " validation samples of "
      << (cosmo ? std::to_string(o.size) + "^3 x 4 int16"
                : std::to_string(o.height) + "x" + std::to_string(o.width) + "x16 float32")
      << " into " << o.out << " (" << workers << " parallel files, seed " << o.seed << ")\n";
  log.flush();

  Progress progress("datagen", static_cast<int64_t>(jobs.size()));
  std::atomic<int64_t> written{0};
  struct Scratch {
    std::vector<int16_t> volume;
    std::vector<float> data, labels, fused;
  };
  std::vector<Scratch> scratch(static_cast<size_t>(workers));  // one per worker
  parallel_for(jobs.size(), threads, [&](size_t j, int worker) {
    omp_set_num_threads(omp_per_worker);  // this worker thread's share of the cores
    auto& [volume, data, labels, fused] = scratch[static_cast<size_t>(worker)];
    const Job job = jobs[j];
    const uint64_t seed = split_seed(o.seed, job.split);
    const std::string path =
        (fs::path(dirs[job.split]) / datagen_file_name(o.kind, o.format, job.index, o.fused))
            .string();
    int64_t bytes = 0;
    if (cosmo) {
      volume.resize(static_cast<size_t>(o.size * o.size * o.size * 4));
      float targets[4];
      generate_cosmoflow_sample(seed, job.index, cspec, volume.data(), targets);
      if (o.format == DatagenFormat::tfrecord) {
        ExampleBuilder ex;
        ex.add_bytes("x", std::as_bytes(std::span<const int16_t>(volume)));
        ex.add_floats("y", std::span<const float>(targets, 4));
        const std::vector<std::byte> record = ex.encode();
        TfRecordWriter w(path, o.gzip ? TfRecordCompression::gzip : TfRecordCompression::none);
        w.write(record);
        w.close();
        bytes = file_bytes(path);
      } else {
        const std::string label = path.substr(0, path.size() - 9) + ".label.npy";
        write_npy(label, DType::f32, {4}, targets);
        write_npy(path, DType::i16, {o.size, o.size, o.size, 4}, volume.data());
        bytes = file_bytes(path) + file_bytes(label);
      }
    } else {
      const int64_t pixels = o.height * o.width;
      data.resize(static_cast<size_t>(pixels * 16));
      labels.resize(static_cast<size_t>(pixels));
      generate_deepcam_sample(seed, job.index, dspec, dstats, data.data(), labels.data());
      if (o.format == DatagenFormat::hdf5) {
        write_deepcam_sample(path, {o.height, o.width, 16}, data.data(), labels.data());
        bytes = file_bytes(path);
      } else if (o.fused) {
        write_fused_npy(path, o.height, o.width, data, labels, fused);
        bytes = file_bytes(path);
      } else {
        const std::string label = deepcam_label_path(path);
        write_npy(label, DType::f32, {o.height, o.width}, labels.data());
        write_npy(path, DType::f32, {o.height, o.width, 16}, data.data());
        bytes = file_bytes(path) + file_bytes(label);
      }
      if (job.split == 0) {
        ChannelSums& cs = sums[static_cast<size_t>(job.index)];
        cs.min.assign(16, std::numeric_limits<double>::infinity());
        cs.max.assign(16, -std::numeric_limits<double>::infinity());
        cs.sum.assign(16, 0);
        cs.sqsum.assign(16, 0);
        for (int64_t p = 0; p < pixels; ++p)
          for (size_t c = 0; c < 16; ++c) {
            const double v = data[static_cast<size_t>(p) * 16 + c];
            cs.min[c] = std::min(cs.min[c], v);
            cs.max[c] = std::max(cs.max[c], v);
            cs.sum[c] += v;
            cs.sqsum[c] += v * v;
          }
      }
    }
    written += bytes;
    progress.advance(1, bytes);
  });

  DatagenResult r;
  r.files = static_cast<int64_t>(jobs.size());
  if (!cosmo) {
    DeepcamStats st;
    st.count = o.n_train;
    const double pixels = static_cast<double>(o.n_train) * static_cast<double>(o.height * o.width);
    for (size_t c = 0; c < 16; ++c) {
      double lo = std::numeric_limits<double>::infinity(), hi = -lo, sum = 0, sq = 0;
      for (const ChannelSums& cs : sums) {  // file order: deterministic
        lo = std::min(lo, cs.min[c]);
        hi = std::max(hi, cs.max[c]);
        sum += cs.sum[c];
        sq += cs.sqsum[c];
      }
      st.minval.push_back(static_cast<float>(lo));
      st.maxval.push_back(static_cast<float>(hi));
      st.mean.push_back(static_cast<float>(sum / pixels));
      st.sqmean.push_back(static_cast<float>(sq / pixels));
    }
    const std::string stats_path = (fs::path(o.out) / "stats.h5").string();
    write_deepcam_stats(stats_path, st);
    written += file_bytes(stats_path);
  }
  progress.finish();
  r.bytes = written.load();
  r.seconds = progress.elapsed_s();
  log << "wrote " << r.files << " samples, " << human_bytes(static_cast<double>(r.bytes)) << " in "
      << r.seconds << " s ("
      << human_bytes(static_cast<double>(r.bytes) / std::max(r.seconds, 1e-9)) << "/s)\n";
  return r;
}

}  // namespace crest
