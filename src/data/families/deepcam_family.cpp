// The DeepCAM data family: one sample per file, 16 float32 channels [H, W, 16] and int32 labels
// [H, W] in {0, 1, 2}, as the reference's HDF5 (climate/data, climate/labels_0), as NVIDIA's
// data-<i>.npy + label-<i>.npy pairs, or as NVIDIA's fused datalabel-<i>.npy (the label as the
// 17th channel); with <root>/stats.h5 beside the splits (per-channel statistics over train).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>

#include "crest/core/error.hpp"
#include "crest/data/data_family.hpp"
#include "crest/data/datasets/deepcam_files.hpp"
#include "crest/data/formats/hdf5.hpp"
#include "crest/data/formats/npy.hpp"
#include "crest/data/synthetic/deepcam_generator.hpp"
#include "file_bytes.hpp"

namespace crest {
namespace {
namespace fs = std::filesystem;

constexpr int64_t kChannels = 16;

// Per-channel sums of one training file, reduced in file order afterwards so stats.h5 has the
// same bits for any thread count.
struct ChannelSums {
  std::vector<double> min, max, sum, sqsum;
};

ChannelSums channel_sums(const std::vector<float>& data, int64_t pixels) {
  ChannelSums cs;
  cs.min.assign(kChannels, std::numeric_limits<double>::infinity());
  cs.max.assign(kChannels, -std::numeric_limits<double>::infinity());
  cs.sum.assign(kChannels, 0);
  cs.sqsum.assign(kChannels, 0);
  for (int64_t p = 0; p < pixels; ++p)
    for (size_t c = 0; c < kChannels; ++c) {
      const double v = data[static_cast<size_t>(p) * kChannels + c];
      cs.min[c] = std::min(cs.min[c], v);
      cs.max[c] = std::max(cs.max[c], v);
      cs.sum[c] += v;
      cs.sqsum[c] += v * v;
    }
  return cs;
}

// NVIDIA's datalabel-*.npy: float32 [H, W, 17], the label as channel 16
// (convert_hdf52fusednpy.py).
void write_fused_npy(const std::string& path, int64_t height, int64_t width,
                     const std::vector<float>& data, const std::vector<float>& labels,
                     std::vector<float>& fused) {
  const int64_t pixels = height * width;
  fused.resize(static_cast<size_t>(pixels * 17));
  for (int64_t p = 0; p < pixels; ++p) {
    std::copy_n(data.begin() + p * kChannels, kChannels, fused.begin() + p * 17);
    fused[static_cast<size_t>(p * 17 + 16)] = labels[static_cast<size_t>(p)];
  }
  write_npy(path, DType::f32, {height, width, 17}, fused.data());
}

class DeepcamDatagen final : public DatagenRun {
 public:
  DeepcamDatagen(const DatagenOptions& o, int workers)
      : o_(o),
        stats_(default_deepcam_channel_stats()),
        scratch_(static_cast<size_t>(workers)),
        sums_(static_cast<size_t>(o.n_train)) {}

  std::string describe() const override {
    return std::to_string(o_.height) + "x" + std::to_string(o_.width) + "x16 float32";
  }

  int64_t write(int worker, int split, int64_t index, uint64_t seed,
                const std::string& path) override {
    auto& [data, labels, fused] = scratch_[static_cast<size_t>(worker)];
    const int64_t pixels = o_.height * o_.width;
    data.resize(static_cast<size_t>(pixels * kChannels));
    labels.resize(static_cast<size_t>(pixels));
    generate_deepcam_sample(seed, index, {o_.height, o_.width, kChannels}, stats_, data.data(),
                            labels.data());
    int64_t bytes = 0;
    if (o_.format == "hdf5") {
      write_deepcam_sample(path, {o_.height, o_.width, kChannels}, data.data(), labels.data());
      bytes = file_bytes(path);
    } else if (o_.fused) {
      write_fused_npy(path, o_.height, o_.width, data, labels, fused);
      bytes = file_bytes(path);
    } else {
      const std::string label = deepcam_label_path(path);
      write_npy(label, DType::f32, {o_.height, o_.width}, labels.data());
      write_npy(path, DType::f32, {o_.height, o_.width, kChannels}, data.data());
      bytes = file_bytes(path) + file_bytes(label);
    }
    if (split == 0) sums_[static_cast<size_t>(index)] = channel_sums(data, pixels);
    return bytes;
  }

  // stats.h5 over the training files, reduced in file order: the same bits for any threads.
  int64_t finish(const std::string& out) override {
    DeepcamStats st;
    st.count = o_.n_train;
    const double pixels =
        static_cast<double>(o_.n_train) * static_cast<double>(o_.height * o_.width);
    for (size_t c = 0; c < kChannels; ++c) {
      double lo = std::numeric_limits<double>::infinity(), hi = -lo, sum = 0, sq = 0;
      for (const ChannelSums& cs : sums_) {
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
    const std::string path = (fs::path(out) / "stats.h5").string();
    write_deepcam_stats(path, st);
    return file_bytes(path);
  }

 private:
  struct Scratch {
    std::vector<float> data, labels, fused;
  };
  const DatagenOptions o_;
  const DeepcamChannelStats stats_;
  std::vector<Scratch> scratch_;   // one per worker
  std::vector<ChannelSums> sums_;  // one per training file
};

void check_datagen_options(const DatagenOptions& o) {
  if (o.height < 16 || o.width < 16 || o.height % 16 || o.width % 16)
    throw_usage("datagen deepcam: --height and --width must be positive multiples of 16 (got " +
                std::to_string(o.height) + "x" + std::to_string(o.width) + ")");
  if (o.gzip) throw_usage("datagen deepcam: --gzip applies to CosmoFlow TFRecords only");
  if (o.fused && o.format != "npy")
    throw_usage("datagen deepcam: --fused needs --format npy (NVIDIA's datalabel-*.npy)");
  if (o.n_train < 1)
    throw_usage("datagen deepcam: --train must be at least 1 (stats.h5 is computed over train)");
}

std::string file_name(const DatagenOptions& o, int64_t index) {
  const char* pattern = o.format != "npy" ? "data-%06lld.h5"
                        : o.fused         ? "datalabel-%06lld.npy"
                                          : "data-%06lld.npy";
  char buf[64];
  std::snprintf(buf, sizeof buf, pattern, static_cast<long long>(index));
  return buf;
}

void check_labels_and_data(const std::vector<float>& data, const std::vector<int32_t>& labels,
                           int64_t width) {
  for (size_t i = 0; i < data.size(); ++i)
    if (!std::isfinite(data[i]))
      throw_input("climate/data holds a non-finite value at element " + std::to_string(i));
  for (size_t p = 0; p < labels.size(); ++p)
    if (labels[p] < 0 || labels[p] > 2)
      throw_input("label " + std::to_string(labels[p]) + " at pixel (" +
                  std::to_string(static_cast<int64_t>(p) / width) + ", " +
                  std::to_string(static_cast<int64_t>(p) % width) + ") is not 0, 1 or 2");
}

// A layout's check: the file read whole, as training reads it, and its values checked.
SampleFileLayout layout(const std::string& name, const std::string& pattern,
                        std::function<bool(const std::string&)> matches, DeepcamFileFormat format,
                        DeepcamNpyLayout npy_layout) {
  auto check = [format, npy_layout](const std::string& path, const ValidateOptions&,
                                    std::vector<std::byte>&) {
    SampleFileFacts f;
    const DeepcamSampleShape s = probe_deepcam_file(path, format, npy_layout);
    f.shape = Shape{s.height, s.width, s.channels};
    std::vector<float> data(static_cast<size_t>(s.height * s.width * s.channels));
    std::vector<int32_t> labels(static_cast<size_t>(s.height * s.width));
    read_deepcam_file(path, format, npy_layout, s, data.data(), labels.data());
    check_labels_and_data(data, labels, s.width);
    f.bytes = file_bytes(path);
    if (format == DeepcamFileFormat::npy && npy_layout == DeepcamNpyLayout::pairs)
      f.bytes += file_bytes(deepcam_label_path(path));
    return f;
  };
  return {name, pattern, std::move(matches), check};
}

// <root>/stats.h5 beside the splits: readable, one value per sample channel, and every
// channel's maxval above its minval (the normalisation divides by their difference).
std::vector<std::pair<std::string, std::string>> check_stats(const std::string& root,
                                                             const Shape& sample_shape) {
  if (sample_shape.rank() != 3) return {};
  const std::string path = (fs::path(root) / "stats.h5").string();
  const int64_t channels = sample_shape[2];
  std::string problem;
  try {
    const DeepcamStats st = read_deepcam_stats(path);
    if (static_cast<int64_t>(st.minval.size()) != channels)
      problem = "holds statistics of " + std::to_string(st.minval.size()) +
                " channels, the samples have " + std::to_string(channels);
    for (size_t c = 0; problem.empty() && c < st.minval.size(); ++c)
      if (!(st.maxval[c] > st.minval[c]))
        problem = "channel " + std::to_string(c) + " has maxval " + std::to_string(st.maxval[c]) +
                  " not above minval " + std::to_string(st.minval[c]);
  } catch (const Error& e) {
    problem = e.what();
    if (problem.starts_with(path + ": ")) problem = problem.substr(path.size() + 2);
  }
  if (problem.empty()) return {};
  return {{path, problem}};
}

DataFamily deepcam_family() {
  DataFamily f;
  f.name = "deepcam";
  f.description = "DeepCAM climate fields (hdf5, or npy pairs or --fused)";
  f.formats = {"hdf5", "npy"};
  f.root_files = {"stats.h5"};
  f.check_options = check_datagen_options;
  f.file_name = file_name;
  f.start = [](const DatagenOptions& o, int workers) -> std::unique_ptr<DatagenRun> {
    return std::make_unique<DeepcamDatagen>(o, workers);
  };
  using F = DeepcamFileFormat;
  using L = DeepcamNpyLayout;
  f.layouts = {
      // Every .h5 of a split, as the reference reads them.
      layout(
          "deepcam-hdf5", "*.h5", [](const std::string& n) { return n.ends_with(".h5"); }, F::hdf5,
          L::pairs),
      layout(
          "deepcam-npy-fused", "datalabel-*.npy",
          [](const std::string& n) { return n.starts_with("datalabel-") && n.ends_with(".npy"); },
          F::npy, L::fused),
      layout(
          "deepcam-npy", "data-*.npy",
          [](const std::string& n) { return n.starts_with("data-") && n.ends_with(".npy"); },
          F::npy, L::pairs),
  };
  f.check_root = check_stats;
  return f;
}

}  // namespace

CREST_REGISTER_DATA_FAMILY(deepcam, deepcam_family());

}  // namespace crest
