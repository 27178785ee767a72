#include "crest/data/datasets/image_folder_source.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <system_error>

#include "crest/core/error.hpp"
#include "crest/core/hash_rng.hpp"
#include "crest/data/image_transforms.hpp"
#include "formats/file_io.hpp"

namespace crest {
namespace {

namespace fs = std::filesystem;

// Draw k of the stream `key`, uniform in [0, 1) (crest/core/hash_rng.hpp).
double uniform(uint64_t key, uint64_t k) { return rng::unit_double(rng::counter_bits(key, k)); }

// The draws' order: the crop's 40 (area, log ratio, row, column per attempt), then the flip.
CropDraws crop_draws(uint64_t key) {
  CropDraws d;
  for (size_t a = 0; a < d.area.size(); ++a) {
    d.area[a] = uniform(key, 4 * a);
    d.log_ratio[a] = uniform(key, 4 * a + 1);
    d.row[a] = uniform(key, 4 * a + 2);
    d.column[a] = uniform(key, 4 * a + 3);
  }
  return d;
}
bool flip_draw(uint64_t key) { return uniform(key, 40) < 0.5; }

bool is_jpeg_name(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return lower.ends_with(".jpg") || lower.ends_with(".jpeg");
}

std::vector<std::string> sorted_entries(const std::string& dir, bool directories) {
  std::error_code ec;
  std::vector<std::string> names;
  fs::directory_iterator it(dir, ec);
  if (ec) throw_input(dir + ": cannot list the directory: " + ec.message());
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) throw_input(dir + ": cannot list the directory: " + ec.message());
    const std::string name = it->path().filename().string();
    if (directories ? it->is_directory(ec) : it->is_regular_file(ec) && is_jpeg_name(name))
      names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

class ImageFolderSource final : public SampleSource {
 public:
  ImageFolderSource(ImageFolderOptions o, std::vector<std::string> files,
                    std::vector<int32_t> labels)
      : opts_(std::move(o)), files_(std::move(files)), labels_(std::move(labels)) {
    const int64_t s = opts_.transform.size;
    spec_.x_shape = Shape{s, s, 3};
    spec_.y_shape = Shape{};
    spec_.y_integer = true;
  }
  std::string format() const override { return "image-folder-jpeg"; }
  const SampleSpec& spec() const override { return spec_; }
  int64_t size() const override { return static_cast<int64_t>(files_.size()); }
  const std::string& path(int64_t i) const override { return files_[static_cast<size_t>(i)]; }

  void read(int64_t i, std::vector<std::byte>& payload) const override {
    const formats_io::InputFile f(path(i));
    payload.resize(f.size());
    f.read_exact_at(0, payload.data(), payload.size(), "JPEG file");
  }

  // Without a draw (crest predict, a validation pass): epoch 0's.
  void decode(int64_t i, std::span<const std::byte> payload, float* x, void* y) const override {
    decode_drawn(i, payload, x, y, SampleDraw{});
  }

  void decode_drawn(int64_t i, std::span<const std::byte> payload, float* x, void* y,
                    const SampleDraw& draw) const override {
    // One stream per (seed, epoch, sample).
    const uint64_t key = rng::splitmix64(
        rng::splitmix64(draw.seed ^ rng::splitmix64(static_cast<uint64_t>(draw.epoch))) ^
        static_cast<uint64_t>(i));
    const ImageTransformOptions& t = opts_.transform;
    JpegDecodeOptions d;
    d.max_pixels = t.max_pixels;
    if (t.train && t.reduced_decode) {
      decode_reduced(i, payload, key, x);
    } else {
      transform_image(decode_jpeg(payload, path(i), d), t, key, x);
    }
    *static_cast<int32_t*>(y) = labels_[static_cast<size_t>(i)];
  }

 private:
  // The crop drawn on the image's full size, decoded at the smallest scale that keeps it at
  // least `size` pixels a side, and mapped onto the decoded pixels.
  void decode_reduced(int64_t i, std::span<const std::byte> payload, uint64_t key, float* x) const {
    const ImageTransformOptions& t = opts_.transform;
    const JpegHeader h = read_jpeg_header(payload, path(i));
    const CropBox box =
        random_resized_crop_box(h.height, h.width, crop_draws(key), t.scale_lo, t.scale_hi);
    JpegDecodeOptions d;
    d.max_pixels = t.max_pixels;
    d.min_height = (t.size * h.height + box.height - 1) / box.height;
    d.min_width = (t.size * h.width + box.width - 1) / box.width;
    const RgbImage image = decode_jpeg(payload, path(i), d);
    CropBox scaled;
    scaled.top = box.top * image.height / h.height;
    scaled.left = box.left * image.width / h.width;
    scaled.height = std::max<int64_t>(
        1, std::min(box.height * image.height / h.height, image.height - scaled.top));
    scaled.width = std::max<int64_t>(
        1, std::min(box.width * image.width / h.width, image.width - scaled.left));
    normalize_to_floats(resize_bilinear(crop(image, scaled), t.size, t.size), t.mean, t.std,
                        flip_draw(key), x);
  }

  ImageFolderOptions opts_;
  std::vector<std::string> files_;
  std::vector<int32_t> labels_;
  SampleSpec spec_;
};

}  // namespace

std::vector<std::string> image_folder_classes(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw_input(dir + ": not a directory (expected one subdirectory of images per class)");
  std::vector<std::string> classes = sorted_entries(dir, true);
  if (classes.empty())
    throw_input(dir + ": no class directory in it (expected <class>/<image>.jpg)");
  return classes;
}

std::shared_ptr<SampleSource> open_image_folder(const ImageFolderOptions& options) {
  const std::vector<std::string> classes = image_folder_classes(options.dir);
  std::vector<std::string> files;
  std::vector<int32_t> labels;
  for (size_t c = 0; c < classes.size(); ++c) {
    const std::string class_dir = options.dir + "/" + classes[c];
    const std::vector<std::string> images = sorted_entries(class_dir, false);
    if (images.empty())
      throw_input(class_dir + ": a class directory without JPEG images (*.jpg, *.jpeg)");
    for (const std::string& name : images) {
      files.push_back(class_dir + "/" + name);
      labels.push_back(static_cast<int32_t>(c));
    }
  }
  if (options.limit > 0 && options.limit < static_cast<int64_t>(files.size())) {
    files.resize(static_cast<size_t>(options.limit));
    labels.resize(static_cast<size_t>(options.limit));
  }
  return std::make_shared<ImageFolderSource>(options, std::move(files), std::move(labels));
}

void transform_image(const RgbImage& image, const ImageTransformOptions& o, uint64_t draw_key,
                     float* x) {
  if (o.train) {
    const CropBox box = random_resized_crop_box(image.height, image.width, crop_draws(draw_key),
                                                o.scale_lo, o.scale_hi);
    normalize_to_floats(resize_bilinear(crop(image, box), o.size, o.size), o.mean, o.std,
                        flip_draw(draw_key), x);
    return;
  }
  const RgbImage resized = resize_shorter_side(image, o.resize);
  const CropBox box = center_crop_box(resized.height, resized.width, o.size);
  normalize_to_floats(crop(resized, box), o.mean, o.std, false, x);
}

}  // namespace crest
