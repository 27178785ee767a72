#include "crest/data/datasets/image_tfrecord_source.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <system_error>

#include "crest/core/error.hpp"
#include "crest/data/formats/example.hpp"
#include "crest/data/formats/tfrecord.hpp"

namespace crest {
namespace {

namespace fs = std::filesystem;

struct ShardName {
  int64_t index = 0, count = 0;
};

// "<split>-00012-of-01024" -> {12, 1024}; false for any other name.
bool parse_shard_name(const std::string& name, const std::string& split, ShardName& out) {
  if (!name.starts_with(split + "-")) return false;
  const std::string rest = name.substr(split.size() + 1);
  long long index = 0, count = 0;
  int used = 0;
  if (std::sscanf(rest.c_str(), "%5lld-of-%5lld%n", &index, &count, &used) != 2 ||
      static_cast<size_t>(used) != rest.size() || rest.size() != 14)
    return false;
  out = {index, count};
  return true;
}

// Sample i: record `record` of shard `shard`, at `span`.
struct RecordAt {
  uint32_t shard = 0;
  uint32_t record = 0;
  TfRecordSpan span;
};

class ImageTfRecordSource final : public SampleSource {
 public:
  ImageTfRecordSource(ImageTfRecordOptions o, std::vector<std::string> shards,
                      std::vector<RecordAt> records)
      : opts_(std::move(o)), shards_(std::move(shards)), records_(std::move(records)) {
    const int64_t s = opts_.transform.size;
    spec_.x_shape = Shape{s, s, 3};
    spec_.y_shape = Shape{};
    spec_.y_integer = true;
  }
  std::string format() const override { return "imagenet-tfrecord"; }
  const SampleSpec& spec() const override { return spec_; }
  int64_t size() const override { return static_cast<int64_t>(records_.size()); }
  const std::string& path(int64_t i) const override { return shards_[at(i).shard]; }

  void read(int64_t i, std::vector<std::byte>& payload) const override {
    read_tfrecord_at(path(i), at(i).span, payload);
  }

  void decode(int64_t i, std::span<const std::byte> payload, float* x, void* y) const override {
    decode_drawn(i, payload, x, y, SampleDraw{});
  }

  void decode_drawn(int64_t i, std::span<const std::byte> payload, float* x, void* y,
                    const SampleDraw& draw) const override {
    const std::string where = path(i) + ": record " + std::to_string(at(i).record);
    const ExampleView ex = ExampleView::parse(payload, where);
    const std::span<const std::byte> image = label_and_image(ex, where, y);
    decode_image_sample(image, where, opts_.transform, image_draw_key(draw, i), x);
  }

  // The label without decoding the JPEG (the record is read whole: one feature of it).
  void decode_targets(int64_t i, std::span<const std::byte> payload, void* y,
                      const SampleDraw& /*draw*/) const override {
    const std::string where = path(i) + ": record " + std::to_string(at(i).record);
    label_and_image(ExampleView::parse(payload, where), where, y);
  }

 private:
  // Writes the record's 0-based label into y and returns its encoded image, both checked.
  std::span<const std::byte> label_and_image(const ExampleView& ex, const std::string& where,
                                             void* y) const {
    const ExampleFeature& image = ex.at("image/encoded", ExampleFeature::Kind::bytes);
    const ExampleFeature& label = ex.at("image/class/label", ExampleFeature::Kind::int64s);
    if (image.bytes.size() != 1 || label.int64s.size() != 1)
      throw_input(where + ": expected one image/encoded and one image/class/label, got " +
                  std::to_string(image.bytes.size()) + " and " +
                  std::to_string(label.int64s.size()));
    const int64_t value = label.int64s[0];
    if (value < opts_.first_label || value - opts_.first_label > INT32_MAX)
      throw_input(where + ": image/class/label " + std::to_string(value) + " is below " +
                  std::to_string(opts_.first_label) +
                  ", the first class's (TensorFlow's ImageNet labels are 1-based)");
    *static_cast<int32_t*>(y) = static_cast<int32_t>(value - opts_.first_label);
    return image.bytes[0];
  }

  const RecordAt& at(int64_t i) const { return records_[static_cast<size_t>(i)]; }

  ImageTfRecordOptions opts_;
  std::vector<std::string> shards_;
  std::vector<RecordAt> records_;
  SampleSpec spec_;
};

}  // namespace

std::vector<std::string> image_tfrecord_shards(const std::string& dir, const std::string& split) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) throw_input(dir + ": cannot list the directory: " + ec.message());
  std::map<int64_t, std::string> by_index;
  int64_t count = -1;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) throw_input(dir + ": cannot list the directory: " + ec.message());
    const std::string name = it->path().filename().string();
    ShardName s;
    if (!parse_shard_name(name, split, s) || !it->is_regular_file(ec)) continue;
    if (count >= 0 && s.count != count)
      throw_input(dir + ": shards of two sets: " + name + " beside shards of " +
                  std::to_string(count) + " (one " + split + "-NNNNN-of-M set per split)");
    count = s.count;
    by_index[s.index] = it->path().string();
  }
  if (by_index.empty()) throw_input(dir + ": no " + split + "-NNNNN-of-MMMMM TFRecord shard in it");
  for (int64_t k = 0; k < count; ++k)
    if (!by_index.contains(k)) {
      char name[64];
      std::snprintf(name, sizeof name, "%s-%05lld-of-%05lld", split.c_str(),
                    static_cast<long long>(k), static_cast<long long>(count));
      throw_input(dir + "/" + name + ": missing (" + std::to_string(by_index.size()) + " of " +
                  std::to_string(count) + " shards present)");
    }
  if (static_cast<int64_t>(by_index.size()) != count)
    throw_input(dir + ": a shard index beyond -of-" + std::to_string(count));
  std::vector<std::string> shards;
  shards.reserve(by_index.size());
  for (auto& [k, path] : by_index) shards.push_back(std::move(path));
  return shards;
}

std::shared_ptr<SampleSource> open_image_tfrecords(const ImageTfRecordOptions& options) {
  std::vector<std::string> shards = image_tfrecord_shards(options.dir, options.split);
  std::vector<RecordAt> records;
  const auto wanted = static_cast<size_t>(options.limit);
  for (size_t s = 0; s < shards.size() && (wanted == 0 || records.size() < wanted); ++s) {
    const std::vector<TfRecordSpan> spans = index_tfrecord_file(shards[s]);
    for (size_t k = 0; k < spans.size(); ++k)
      records.push_back({static_cast<uint32_t>(s), static_cast<uint32_t>(k), spans[k]});
  }
  if (wanted > 0 && records.size() > wanted) records.resize(wanted);
  if (records.empty())
    throw_input(options.dir + ": the " + options.split + " shards hold no record");
  return std::make_shared<ImageTfRecordSource>(options, std::move(shards), std::move(records));
}

}  // namespace crest
