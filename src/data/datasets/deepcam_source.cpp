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
    select_channels(all.data(), pixels_, data);
  }

  void decode(int64_t i, std::span<const std::byte> payload, float* x, void* y) const override {
    decode_pixels(i, payload, pixels_, x, y);
  }

  // A spatial split's block: only the window's pixels of the selected channels, and the whole
  // label map (the loss reads every label; it is 1/(C+1) of the sample).
  bool reads_blocks() const override {
    return deepcam_reads_windows(files_.format, files_.npy_layout);
  }
  void read_block(int64_t i, const SampleBlock& block,
                  std::vector<std::byte>& payload) const override {
    const DeepcamWindow w{block.begin.at(0), block.end.at(0), block.begin.at(1), block.end.at(1)};
    const auto data = static_cast<size_t>(w.pixels() * selected_) * 4;
    payload.resize(data + label_bytes());
    auto* labels = reinterpret_cast<int32_t*>(payload.data() + data);
    auto* out = reinterpret_cast<float*>(payload.data());
    if (all_in_order_)
      return read_deepcam_window(path(i), files_.format, files_.npy_layout, opts_.shape, w, out,
                                 labels);
    thread_local std::vector<float> all;
    all.resize(static_cast<size_t>(w.pixels() * opts_.shape.channels));
    read_deepcam_window(path(i), files_.format, files_.npy_layout, opts_.shape, w, all.data(),
                        labels);
    select_channels(all.data(), w.pixels(), out);
  }
  void decode_block(int64_t i, const SampleBlock& block, std::span<const std::byte> payload,
                    float* x, void* y, const SampleDraw& /*draw*/) const override {
    decode_pixels(i, payload, block.x_shape(spec_.x_shape).numel() / selected_, x, y);
  }

  // The label map alone where the files keep it apart (HDF5, data-/label- pairs): the payload is
  // the labels, checked into y. A fused file is read and decoded whole (the default).
  bool reads_targets_alone() const override {
    return deepcam_reads_windows(files_.format, files_.npy_layout);
  }
  void read_targets(int64_t i, std::vector<std::byte>& payload) const override {
    if (!reads_targets_alone()) return read(i, payload);
    payload.resize(label_bytes());
    read_deepcam_labels(path(i), files_.format, files_.npy_layout, opts_.shape,
                        reinterpret_cast<int32_t*>(payload.data()));
  }
  void decode_targets(int64_t i, std::span<const std::byte> payload, void* y,
                      const SampleDraw& draw) const override {
    if (!reads_targets_alone()) return SampleSource::decode_targets(i, payload, y, draw);
    decode_pixels(i, payload, 0, nullptr, y);
  }

 private:
  // The selected channels of `pixels` pixels of every channel.
  void select_channels(const float* all, int64_t pixels, float* out) const {
    for (int64_t p = 0; p < pixels; ++p)
      for (int64_t c = 0; c < selected_; ++c)
        out[p * selected_ + c] =
            all[p * opts_.shape.channels + opts_.channels[static_cast<size_t>(c)]];
  }

  // A payload of `pixels` pixels of the selected channels (the sample's or a block's), then the
  // whole label map: normalised into x, the labels checked into y.
  void decode_pixels(int64_t i, std::span<const std::byte> payload, int64_t pixels, float* x,
                     void* y) const {
    const auto data = static_cast<size_t>(pixels * selected_) * 4;
    CREST_CHECK(payload.size() == data + label_bytes(), "deepcam payload size of " + path(i));
    const auto* values = reinterpret_cast<const float*>(payload.data());
    const auto* labels = reinterpret_cast<const int32_t*>(payload.data() + data);
    const int64_t C = selected_;
    for (int64_t p = 0; p < pixels; ++p)
      for (int64_t c = 0; c < C; ++c) {
        const ChannelNorm n = norm_[static_cast<size_t>(c)];
        x[p * C + c] = n.scale * (values[p * C + c] - n.shift);
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
