#include "crest/data/datasets/image_folder_source.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <system_error>

#include "crest/core/error.hpp"
#include "formats/file_io.hpp"

namespace crest {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> sorted_entries(const std::string& dir, bool directories) {
  std::error_code ec;
  std::vector<std::string> names;
  fs::directory_iterator it(dir, ec);
  if (ec) throw_input(dir + ": cannot list the directory: " + ec.message());
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) throw_input(dir + ": cannot list the directory: " + ec.message());
    const std::string name = it->path().filename().string();
    if (directories ? it->is_directory(ec) : it->is_regular_file(ec) && is_jpeg_file_name(name))
      names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

class ImageFolderSource final : public SampleSource {
 public:
  ImageFolderSource(ImageFolderOptions o, std::vector<std::string> classes,
                    std::vector<std::string> files, std::vector<int32_t> labels)
      : opts_(std::move(o)),
        classes_(std::move(classes)),
        files_(std::move(files)),
        labels_(std::move(labels)) {
    const int64_t s = opts_.transform.size;
    spec_.x_shape = Shape{s, s, 3};
    spec_.y_shape = Shape{};
    spec_.y_integer = true;
  }
  std::string format() const override { return "image-folder-jpeg"; }
  const SampleSpec& spec() const override { return spec_; }
  int64_t size() const override { return static_cast<int64_t>(files_.size()); }
  const std::string& path(int64_t i) const override { return files_[static_cast<size_t>(i)]; }
  std::vector<std::string> class_names() const override { return classes_; }

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
    decode_image_sample(payload, path(i), opts_.transform, image_draw_key(draw, i), x);
    *static_cast<int32_t*>(y) = labels_[static_cast<size_t>(i)];
  }

  // The label is the image's class directory: nothing to read or decode.
  bool reads_targets_alone() const override { return true; }
  void read_targets(int64_t /*i*/, std::vector<std::byte>& payload) const override {
    payload.clear();
  }
  void decode_targets(int64_t i, std::span<const std::byte> /*payload*/, void* y,
                      const SampleDraw& /*draw*/) const override {
    *static_cast<int32_t*>(y) = labels_[static_cast<size_t>(i)];
  }

 private:
  ImageFolderOptions opts_;
  std::vector<std::string> classes_;
  std::vector<std::string> files_;
  std::vector<int32_t> labels_;
  SampleSpec spec_;
};

}  // namespace

bool is_jpeg_file_name(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return lower.ends_with(".jpg") || lower.ends_with(".jpeg");
}

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
  return std::make_shared<ImageFolderSource>(options, classes, std::move(files), std::move(labels));
}

}  // namespace crest
