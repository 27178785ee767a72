#include "crest/data/datasets/deepcam_source.hpp"

#include <cmath>
#include <cstring>
#include <numeric>

#include "crest/core/error.hpp"

namespace crest {
namespace {

// The reference's float32 arithmetic (cam_hdf5_dataset.py): shift = minval, scale =
// 1 / (maxval - minval) computed in float32, x' = scale * (x - shift).
struct ChannelNorm {
  float shift, scale;
};

class DeepcamSource final : public SampleSource {
 public:
  DeepcamSource(const DeepcamSourceOptions& o, DeepcamFiles files, std::vector<ChannelNorm> norm)
      : opts_(o), files_(std::move(files)), norm_(std::move(norm)) {
    selected_ = static_cast<int64_t>(opts_.channels.size());
    pixels_ = o.shape.height * o.shape.width;
    spec_.x_shape = Shape{o.shape.height, o.shape.width, selected_};
    spec_.y_shape = Shape{o.shape.height, o.shape.width};
    spec_.y_integer = true;
    all_in_order_ = selected_ == o.shape.channels;
    for (int64_t c = 0; all_in_order_ && c < selected_; ++c)
      all_in_order_ = opts_.channels[static_cast<size_t>(c)] == c;
  }
  std::string format() const override { return files_.describe(); }
  const SampleSpec& spec() const override { return spec_; }
  int64_t size() const override { return static_cast<int64_t>(files_.files.size()); }
  const std::string& path(int64_t i) const override { return files_.files[static_cast<size_t>(i)]; }

  // Payload: the selected channels, float32 [H, W, selected], then int32 labels [H, W]. Only the
  // selected channels are kept, so the cache holds no channel the model never reads.
  void read(int64_t i, std::vector<std::byte>& payload) const override {
    payload.resize(data_bytes() + label_bytes());
    auto* data = reinterpret_cast<float*>(payload.data());
    auto* labels = reinterpret_cast<int32_t*>(payload.data() + data_bytes());
    if (all_in_order_)
      return read_deepcam_file(path(i), files_.format, files_.npy_layout, opts_.shape, data,
                               labels);
    thread_local std::vector<float> all;
    all.resize(static_cast<size_t>(pixels_ * opts_.shape.channels));
    read_deepcam_file(path(i), files_.format, files_.npy_layout, opts_.shape, all.data(), labels);
    for (int64_t p = 0; p < pixels_; ++p)
      for (int64_t c = 0; c < selected_; ++c)
        data[p * selected_ + c] = all[static_cast<size_t>(p * opts_.shape.channels +
                                                          opts_.channels[static_cast<size_t>(c)])];
  }

  void decode(int64_t i, std::span<const std::byte> payload, float* x, void* y) const override {
    CREST_CHECK(payload.size() == data_bytes() + label_bytes(),
                "deepcam payload size of " + path(i));
    const auto* data = reinterpret_cast<const float*>(payload.data());
    const auto* labels = reinterpret_cast<const int32_t*>(payload.data() + data_bytes());
    const int64_t C = selected_;
    for (int64_t p = 0; p < pixels_; ++p)
      for (int64_t c = 0; c < C; ++c) {
        const ChannelNorm n = norm_[static_cast<size_t>(c)];
        x[p * C + c] = n.scale * (data[p * C + c] - n.shift);
      }
    auto* out = static_cast<int32_t*>(y);
    for (int64_t p = 0; p < pixels_; ++p) {
      const int32_t l = labels[p];
      if (l < 0 || l > 2)
        throw_input(path(i) + ": label " + std::to_string(l) + " at pixel (" +
                    std::to_string(p / opts_.shape.width) + ", " +
                    std::to_string(p % opts_.shape.width) + ") is not a class id 0, 1 or 2");
      out[p] = l;
    }
  }

 private:
  size_t data_bytes() const { return static_cast<size_t>(pixels_ * selected_) * 4; }
  size_t label_bytes() const { return static_cast<size_t>(pixels_) * 4; }

  DeepcamSourceOptions opts_;
  DeepcamFiles files_;
  std::vector<ChannelNorm> norm_;  // per selected channel
  SampleSpec spec_;
  int64_t pixels_ = 0, selected_ = 0;
  bool all_in_order_ = false;  // every channel, in file order: read straight into the payload
};

// The normalisation of each selected channel; a channel whose maxval is not above its minval
// would make every value of it inf or NaN (the reference divides by their difference).
std::vector<ChannelNorm> channel_norms(const DeepcamSourceOptions& o) {
  const auto n = static_cast<int64_t>(o.stats.minval.size());
  if (n != o.shape.channels || static_cast<int64_t>(o.stats.maxval.size()) != n)
    throw_input(o.stats_path + ": holds statistics of " + std::to_string(n) +
                " channels, the samples have " + std::to_string(o.shape.channels));
  std::vector<ChannelNorm> norm;
  for (int64_t c : o.channels) {
    const auto i = static_cast<size_t>(c);
    const float lo = o.stats.minval[i], hi = o.stats.maxval[i];
    const float range = hi - lo;
    if (!(range > 0) || !std::isfinite(1.0f / range))
      throw_input(o.stats_path + ": channel " + std::to_string(c) + " has minval " +
                  std::to_string(lo) + " and maxval " + std::to_string(hi) +
                  ", which cannot normalise it (maxval must be above minval)");
    norm.push_back({lo, 1.0f / range});
  }
  return norm;
}

}  // namespace

std::shared_ptr<SampleSource> open_deepcam_source(const DeepcamSourceOptions& options) {
  DeepcamSourceOptions o = options;
  if (o.channels.empty()) {
    o.channels.resize(static_cast<size_t>(o.shape.channels));
    std::iota(o.channels.begin(), o.channels.end(), int64_t{0});
  }
  for (int64_t c : o.channels)
    if (c < 0 || c >= o.shape.channels)
      throw_input(o.dir + ": channel " + std::to_string(c) + " selected, the samples have " +
                  std::to_string(o.shape.channels));
  std::vector<ChannelNorm> norm = channel_norms(o);
  DeepcamFiles files = list_deepcam_files(o.dir, o.format);
  if (o.limit > 0) {
    if (static_cast<int64_t>(files.files.size()) < o.limit)
      throw_input(o.dir + ": holds " + std::to_string(files.files.size()) + " sample files but " +
                  std::to_string(o.limit) + " are configured (data.n_train / data.n_valid)");
    files.files.resize(static_cast<size_t>(o.limit));
  }
  // The first file's shape now, so a wrong data.sample_shape fails before training starts.
  const std::string& first = files.files.front();
  const DeepcamSampleShape found = probe_deepcam_file(first, files.format, files.npy_layout);
  if (found != o.shape)
    throw_input(first + ": sample is " + found.str() + ", but data.sample_shape says " +
                o.shape.str());
  return std::make_shared<DeepcamSource>(o, std::move(files), std::move(norm));
}

}  // namespace crest
