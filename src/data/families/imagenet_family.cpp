// The ImageNet-style data family: JPEG images in class folders (torchvision's ImageFolder
// layout), train/<class>/<image>.JPEG and validation/<class>/<image>.JPEG. crest datagen writes
// a learnable synthetic set of 10 classes: each image a field of low-frequency waves and noise in
// its class's hue, of random size around --size pixels a side, so a network learns the classes
// from any crop and either orientation (the training transform's) within a few epochs.
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
#include "crest/data/formats/jpeg.hpp"

namespace crest {
namespace {

constexpr int64_t kClasses = 10;
constexpr int kQuality = 90;

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

 private:
  const DatagenOptions o_;
};

void check_datagen_options(const DatagenOptions& o) {
  if (o.size < 16 || o.size > 4096)
    throw_usage("datagen imagenet: --size " + std::to_string(o.size) +
                " must be 16 to 4096 (the images' typical side in pixels)");
  if (o.gzip) throw_usage("datagen imagenet: --gzip applies to CosmoFlow TFRecords only");
  if (o.fused) throw_usage("datagen imagenet: --fused applies to DeepCAM npy files only");
}

// class<c>/<index>.JPEG: ImageNet's file extension, one folder per class.
std::string file_name(const DatagenOptions& /*o*/, int64_t index) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "class%03lld/img-%07lld.JPEG",
                static_cast<long long>(index % kClasses), static_cast<long long>(index));
  return buf;
}

DataFamily imagenet_family() {
  DataFamily f;
  f.name = "imagenet";
  f.description = "ImageNet-style JPEG images in class folders (synthetic: 10 classes)";
  f.formats = {"jpeg"};
  f.check_options = check_datagen_options;
  f.file_name = file_name;
  f.start = [](const DatagenOptions& o, int /*workers*/) -> std::unique_ptr<DatagenRun> {
    return std::make_unique<ImagenetDatagen>(o);
  };
  return f;
}

}  // namespace

CREST_REGISTER_DATA_FAMILY(imagenet, imagenet_family());

}  // namespace crest
