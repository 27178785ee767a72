// The ImageNet-style data family in both layouts: JPEG images in class folders (torchvision's
// ImageFolder layout), train/<class>/<image>.JPEG and validation/<class>/<image>.JPEG, and the
// same images as TensorFlow's TFRecord shards beside them, train-NNNNN-of-MMMMM and
// validation-NNNNN-of-MMMMM (image/encoded, the 1-based image/class/label, as
// build_imagenet_data.py writes them). crest datagen writes a learnable synthetic set of 10
// classes: each image a field of low-frequency waves and noise in its class's hue, of random size
// around --size pixels a side, so a network learns the classes from any crop and either
// orientation (the training transform's) within a few epochs.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <utility>

#include "crest/core/atomic_file.hpp"
#include "crest/core/error.hpp"
#include "crest/core/hash_rng.hpp"
#include "crest/data/data_family.hpp"
#include "crest/data/datasets/image_folder_source.hpp"
#include "crest/data/formats/example.hpp"
#include "crest/data/formats/jpeg.hpp"
#include "crest/data/formats/tfrecord.hpp"
#include "formats/file_io.hpp"

namespace crest {
namespace {

constexpr int64_t kClasses = 10;
constexpr int kQuality = 90;
constexpr int64_t kRecordsPerShard = 256;

// Draw k of the stream `key`, uniform in [0, 1) (crest/core/hash_rng.hpp).
double uniform(uint64_t key, uint64_t k) { return rng::unit_double(rng::counter_bits(key, k)); }

// Class c's colour: hue c / 10 at full saturation, as RGB in [0, 1].
std::array<double, 3> class_colour(int64_t c) {
  const double h = static_cast<double>(c) / kClasses * 6.0;
  const double x = 1.0 - std::abs(std::fmod(h, 2.0) - 1.0);
  const int sector = static_cast<int>(h);
  const std::array<std::array<double, 3>, 6> rgb{
      {{1, x, 0}, {x, 1, 0}, {0, 1, x}, {0, x, 1}, {x, 0, 1}, {1, 0, x}}};
  return rgb[static_cast<size_t>(sector % 6)];
}

// Image `index` of a split: class index % 10, size and texture from (seed, index).
RgbImage synthetic_image(uint64_t seed, int64_t index, int64_t size) {
  const uint64_t key = rng::splitmix64(seed ^ rng::splitmix64(static_cast<uint64_t>(index)));
  RgbImage image;
  image.height = static_cast<int64_t>(static_cast<double>(size) * (0.75 + 0.5 * uniform(key, 0)));
  image.width = static_cast<int64_t>(static_cast<double>(size) * (0.75 + 0.5 * uniform(key, 1)));
  const std::array<double, 3> colour = class_colour(index % kClasses);
  const double brightness = 0.55 + 0.3 * uniform(key, 2);
  double fy[3], fx[3], phase[3];
  for (int k = 0; k < 3; ++k) {  // waves of 1 to 4 periods across the image
    fy[k] = (1 + 3 * uniform(key, 3 + 3 * k)) * 2 * M_PI / static_cast<double>(image.height);
    fx[k] = (1 + 3 * uniform(key, 4 + 3 * k)) * 2 * M_PI / static_cast<double>(image.width);
    phase[k] = 2 * M_PI * uniform(key, 5 + 3 * k);
  }
  image.pixels.resize(static_cast<size_t>(image.height * image.width * 3));
  uint64_t n = 16;
  for (int64_t r = 0; r < image.height; ++r)
    for (int64_t c = 0; c < image.width; ++c) {
      double wave = 0;
      for (int k = 0; k < 3; ++k)
        wave +=
            std::sin(fy[k] * static_cast<double>(r) + fx[k] * static_cast<double>(c) + phase[k]);
      const double level = brightness * (0.75 + 0.25 * wave / 3);
      for (int k = 0; k < 3; ++k) {
        const double v = 255 * (0.15 + 0.7 * colour[static_cast<size_t>(k)] * level) +
                         24 * (uniform(key, n++) - 0.5);
        image.pixels[static_cast<size_t>((r * image.width + c) * 3 + k)] =
            static_cast<uint8_t>(std::clamp(std::lround(v), 0L, 255L));
      }
    }
  return image;
}

// class<c>/<index>.JPEG: ImageNet's file extension, one folder per class.
std::string file_name(const DatagenOptions& /*o*/, int64_t index) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "class%03lld/img-%07lld.JPEG",
                static_cast<long long>(index % kClasses), static_cast<long long>(index));
  return buf;
}

std::string shard_name(const std::string& split, int64_t k, int64_t count) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s-%05lld-of-%05lld", split.c_str(), static_cast<long long>(k),
                static_cast<long long>(count));
  return buf;
}

// build_imagenet_data.py's features of one image (its bounding boxes aside).
std::vector<std::byte> image_example(const std::vector<std::byte>& jpeg, int64_t index,
                                     const std::string& name) {
  const JpegHeader h = read_jpeg_header(jpeg, name);
  const int64_t label = index % kClasses + 1, height = h.height, width = h.width, channels = 3;
  const std::string synset = name.substr(0, name.find('/'));
  const auto text = [](const std::string& t) {
    return std::span<const std::byte>(reinterpret_cast<const std::byte*>(t.data()), t.size());
  };
  const std::string format = "JPEG", colorspace = "RGB";
  ExampleBuilder b;
  b.add_bytes("image/encoded", jpeg)
      .add_int64s("image/class/label", {&label, 1})
      .add_bytes("image/class/synset", text(synset))
      .add_bytes("image/format", text(format))
      .add_bytes("image/colorspace", text(colorspace))
      .add_bytes("image/filename", text(name))
      .add_int64s("image/height", {&height, 1})
      .add_int64s("image/width", {&width, 1})
      .add_int64s("image/channels", {&channels, 1});
  return b.encode();
}

// The images of one split, index order, as shards of kRecordsPerShard; stale shards of another
// count (an earlier --overwrite run) are removed so one set remains.
int64_t write_shards(const DatagenOptions& o, const std::string& split, int64_t n) {
  namespace fs = std::filesystem;
  const int64_t count = (n + kRecordsPerShard - 1) / kRecordsPerShard;
  const std::string first = shard_name(split, 0, count);
  const std::string suffix = first.substr(first.rfind("-of-"));
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(o.out, ec)) {
    const std::string name = e.path().filename().string();
    if (name.starts_with(split + "-") && name.find("-of-") != std::string::npos &&
        !name.ends_with(suffix))
      fs::remove(e.path(), ec);
  }
  int64_t bytes = 0;
  for (int64_t k = 0; k < count; ++k) {
    TfRecordWriter w((fs::path(o.out) / shard_name(split, k, count)).string());
    for (int64_t i = k * kRecordsPerShard; i < std::min(n, (k + 1) * kRecordsPerShard); ++i) {
      const std::string name = file_name(o, i);
      const formats_io::InputFile file((fs::path(o.out) / split / name).string());
      std::vector<std::byte> jpeg(file.size());
      file.read_exact_at(0, jpeg.data(), jpeg.size(), "JPEG file");
      const std::vector<std::byte> record = image_example(jpeg, i, name);
      w.write(record);
      bytes += static_cast<int64_t>(record.size() + kTfRecordFramingBytes);
    }
    w.close();
  }
  return bytes;
}

class ImagenetDatagen final : public DatagenRun {
 public:
  explicit ImagenetDatagen(DatagenOptions o) : o_(std::move(o)) {}
  std::string describe() const override {
    return "JPEG images of about " + std::to_string(o_.size) + " px a side in " +
           std::to_string(kClasses) + " classes";
  }
  int64_t write(int /*worker*/, int /*split*/, int64_t index, uint64_t seed,
                const std::string& path) override {
    const std::vector<std::byte> jpeg =
        encode_jpeg(synthetic_image(seed, index, o_.size), kQuality);
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
    if (ec) throw_input(path + ": cannot create its class directory: " + ec.message());
    write_file_atomically(path, {reinterpret_cast<const char*>(jpeg.data()), jpeg.size()});
    return static_cast<int64_t>(jpeg.size());
  }
  // The TFRecord layout of the same images, from the files just written.
  int64_t finish(const std::string& /*out*/) override {
    return write_shards(o_, "train", o_.n_train) + write_shards(o_, "validation", o_.n_valid);
  }

 private:
  const DatagenOptions o_;
};

// "train-00012-of-01024", "validation-...": TensorFlow's shard names.
bool is_shard_name(const std::string& name) {
  return (name.starts_with("train-") || name.starts_with("validation-")) &&
         name.find("-of-") != std::string::npos;
}

// Shards of a split already in `out` (a real ImageNet conversion, or an earlier datagen run).
std::string existing_shard(const DatagenOptions& o) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(o.out, ec))
    if (is_shard_name(e.path().filename().string())) return e.path().string();
  return {};
}

void check_datagen_options(const DatagenOptions& o) {
  if (const std::string shard = existing_shard(o); !o.overwrite && !shard.empty())
    throw_input(shard + ": exists; refusing to write TFRecord shards over it (pass --overwrite)");
  if (o.size < 16 || o.size > 4096)
    throw_usage("datagen imagenet: --size " + std::to_string(o.size) +
                " must be 16 to 4096 (the images' typical side in pixels)");
  if (o.gzip) throw_usage("datagen imagenet: --gzip applies to CosmoFlow TFRecords only");
  if (o.fused) throw_usage("datagen imagenet: --fused applies to DeepCAM npy files only");
}

// crest validate: a JPEG file decoded whole, as training would (its size varies; the shape
// compared is the decoded image's channels, 3).
SampleFileFacts check_jpeg(const std::string& path, const ValidateOptions& /*o*/,
                           std::vector<std::byte>& scratch) {
  const formats_io::InputFile file(path);
  scratch.resize(file.size());
  file.read_exact_at(0, scratch.data(), scratch.size(), "JPEG file");
  decode_jpeg(scratch, path);
  return {Shape{3}, static_cast<int64_t>(scratch.size()), ""};
}

// crest validate: every record of a shard read (both CRCs), parsed, its JPEG decoded whole and
// its label checked (1-based).
SampleFileFacts check_shard(const std::string& path, const ValidateOptions& /*o*/,
                            std::vector<std::byte>& scratch) {
  const std::vector<TfRecordSpan> spans = index_tfrecord_file(path);
  int64_t bytes = 0;
  for (size_t k = 0; k < spans.size(); ++k) {
    read_tfrecord_at(path, spans[k], scratch);
    const std::string where = path + ": record " + std::to_string(k);
    const ExampleView ex = ExampleView::parse(scratch, where);
    const ExampleFeature& image = ex.at("image/encoded", ExampleFeature::Kind::bytes);
    const ExampleFeature& label = ex.at("image/class/label", ExampleFeature::Kind::int64s);
    if (image.bytes.size() != 1 || label.int64s.size() != 1 || label.int64s[0] < 1)
      throw_input(where + ": expected one image/encoded and one image/class/label >= 1");
    decode_jpeg(image.bytes[0], where);
    bytes += static_cast<int64_t>(spans[k].length + kTfRecordFramingBytes);
  }
  return {Shape{3}, bytes, "", static_cast<int64_t>(spans.size())};
}

// The splits' class folders must be the same list: a label is a class's index in it.
std::vector<std::pair<std::string, std::string>> check_class_lists(const std::string& root,
                                                                   const Shape& /*shape*/) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const std::string train = root + "/train";
  const std::string valid =
      fs::is_directory(root + "/validation", ec) ? root + "/validation" : root + "/val";
  if (!fs::is_directory(train, ec) || !fs::is_directory(valid, ec)) return {};
  try {
    const std::vector<std::string> a = image_folder_classes(train), b = image_folder_classes(valid);
    if (a != b) {
      size_t i = 0;
      while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
      const std::string first = i < b.size() ? "'" + b[i] + "'" : "none";
      return {{valid, "its " + std::to_string(b.size()) + " class folders differ from train/'s " +
                          std::to_string(a.size()) + " (class " + std::to_string(i) + " is " +
                          first + "): a label would name another class"}};
    }
  } catch (const Error& e) {
    return {{root, e.what()}};
  }
  return {};
}

DataFamily imagenet_family() {
  DataFamily f;
  f.name = "imagenet";
  f.description =
      "ImageNet-style JPEG images in class folders and TFRecord shards (synthetic: 10 classes)";
  f.formats = {"jpeg"};
  f.check_options = check_datagen_options;
  f.file_name = file_name;
  f.start = [](const DatagenOptions& o, int /*workers*/) -> std::unique_ptr<DatagenRun> {
    return std::make_unique<ImagenetDatagen>(o);
  };
  f.layouts = {{"imagenet-jpeg", "<class>/*.jpg, *.jpeg", is_jpeg_file_name, check_jpeg},
               {"imagenet-tfrecord", "train-NNNNN-of-MMMMM", is_shard_name, check_shard}};
  f.check_root = check_class_lists;
  return f;
}

}  // namespace

CREST_REGISTER_DATA_FAMILY(imagenet, imagenet_family());

}  // namespace crest
