#include "crest/data/datasets/deepcam_source.hpp"

#include <cstring>
#include <filesystem>

#include "crest/core/error.hpp"
#include "crest/data/formats/npy.hpp"

namespace crest {
namespace {

class DeepcamSource final : public SampleSource {
 public:
  DeepcamSource(const DeepcamSourceOptions& o, std::vector<std::string> files)
      : opts_(o), files_(std::move(files)) {
    spec_.x_shape = Shape{o.height, o.width, o.channels};
    spec_.y_shape = Shape{o.height, o.width};
    spec_.y_integer = true;
    pixels_ = o.height * o.width;
    // Per-channel scale and offset so decoding is one multiply-add per value.
    for (int64_t c = 0; c < o.channels; ++c) {
      const double lo = o.stats.minval[static_cast<size_t>(c)],
                   hi = o.stats.maxval[static_cast<size_t>(c)];
      scale_.push_back(hi > lo ? static_cast<float>(1.0 / (hi - lo)) : 0.f);
      offset_.push_back(static_cast<float>(lo));
    }
  }
  std::string format() const override {
    return opts_.format == DeepcamFileFormat::npy ? "deepcam-npy" : "deepcam-hdf5";
  }
  const SampleSpec& spec() const override { return spec_; }
  int64_t size() const override { return static_cast<int64_t>(files_.size()); }
  const std::string& path(int64_t i) const override { return files_[static_cast<size_t>(i)]; }

  // Payload: float32 data [H, W, C] then int32 labels [H, W].
  void read(int64_t i, std::vector<std::byte>& payload) const override {
    const std::string& file = path(i);
    const size_t db = static_cast<size_t>(pixels_ * opts_.channels) * 4,
                 lb = static_cast<size_t>(pixels_) * 4;
    payload.resize(db + lb);
    auto* data = reinterpret_cast<float*>(payload.data());
    auto* labels = reinterpret_cast<int32_t*>(payload.data() + db);
    if (opts_.format == DeepcamFileFormat::hdf5) {
      read_deepcam_sample(file, {opts_.height, opts_.width, opts_.channels}, data, labels);
    } else {
      read_npy_into(file, DType::f32, spec_.x_shape.to_vector(), data);
      const std::string label_file = label_path(file);
      // Labels come as float32 (as the HDF5 files) or integers; convert through the header's dtype.
      const NpyHeader h = read_npy_header(label_file);
      if (h.dtype == NpyDType::i32) {
        read_npy_into(label_file, DType::i32, spec_.y_shape.to_vector(), labels);
      } else {
        std::vector<float> tmp(static_cast<size_t>(pixels_));
        read_npy_into(label_file, DType::f32, spec_.y_shape.to_vector(), tmp.data());
        for (int64_t p = 0; p < pixels_; ++p)
          labels[p] = static_cast<int32_t>(tmp[static_cast<size_t>(p)]);
      }
    }
  }

  void decode(int64_t i, std::span<const std::byte> payload, float* x, void* y) const override {
    const size_t db = static_cast<size_t>(pixels_ * opts_.channels) * 4,
                 lb = static_cast<size_t>(pixels_) * 4;
    CREST_CHECK(payload.size() == db + lb, "deepcam payload size of " + path(i));
    const auto* data = reinterpret_cast<const float*>(payload.data());
    const auto* labels = reinterpret_cast<const int32_t*>(payload.data() + db);
    const int64_t C = opts_.channels;
    for (int64_t p = 0; p < pixels_; ++p)
      for (int64_t c = 0; c < C; ++c)
        x[p * C + c] =
            (data[p * C + c] - offset_[static_cast<size_t>(c)]) * scale_[static_cast<size_t>(c)];
    auto* out = static_cast<int32_t*>(y);
    for (int64_t p = 0; p < pixels_; ++p) {
      const int32_t l = labels[p];
      if (l < 0 || l > 2)
        throw_input(path(i) + ": label " + std::to_string(l) + " at pixel (" +
                    std::to_string(p / opts_.width) + ", " + std::to_string(p % opts_.width) +
                    ") is not a class id 0, 1 or 2");
      out[p] = l;
    }
  }

  static std::string label_path(const std::string& data_path) {
    const std::filesystem::path p(data_path);
    std::string name = p.filename().string();
    if (name.rfind("data-", 0) == 0) name = "label-" + name.substr(5);
    return (p.parent_path() / name).string();
  }

 private:
  DeepcamSourceOptions opts_;
  std::vector<std::string> files_;
  SampleSpec spec_;
  int64_t pixels_ = 0;
  std::vector<float> scale_, offset_;
};

}  // namespace

const char* deepcam_file_suffix(DeepcamFileFormat format) {
  return format == DeepcamFileFormat::npy ? ".npy" : ".h5";
}

std::shared_ptr<SampleSource> open_deepcam_source(const DeepcamSourceOptions& o) {
  if (static_cast<int64_t>(o.stats.minval.size()) != o.channels ||
      static_cast<int64_t>(o.stats.maxval.size()) != o.channels)
    throw_input(o.dir + ": the normalisation statistics have " +
                std::to_string(o.stats.minval.size()) + " channels, the samples " +
                std::to_string(o.channels));
  std::vector<std::string> all = list_sample_files(o.dir, {deepcam_file_suffix(o.format)});
  std::vector<std::string> files;
  // Only data-*.{h5,npy}: label-*.npy sit beside the data in the npy variant.
  for (auto& f : all)
    if (std::filesystem::path(f).filename().string().rfind("data-", 0) == 0)
      files.push_back(std::move(f));
  if (files.empty())
    throw_input(o.dir + ": no data-*" + deepcam_file_suffix(o.format) + " sample files");
  if (o.limit > 0) {
    if (static_cast<int64_t>(files.size()) < o.limit)
      throw_input(o.dir + ": holds " + std::to_string(files.size()) + " sample files but " +
                  std::to_string(o.limit) + " are configured");
    files.resize(static_cast<size_t>(o.limit));
  }
  return std::make_shared<DeepcamSource>(o, std::move(files));
}

}  // namespace crest
