// ImageNet-style image folders, as torchvision's ImageFolder reads them: <dir>/<class>/<image>,
// the classes the sorted names of the subdirectories (a sample's label is its class's index), the
// JPEG files (.jpg, .jpeg in any case) of each class sorted by name, class after class.
//
// A sample is the transformed image, float32 [size, size, 3] channels-last, and its int32 label:
// for training torchvision's RandomResizedCrop(size), RandomHorizontalFlip and Normalize (the
// crop and the flip drawn from the run's seed, the epoch and the sample: SampleDraw); for
// validation Resize(resize) of the shorter side, CenterCrop(size) and Normalize. The payload read
// (and cached) is the file's bytes: decoding and transforming happen per use.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "crest/data/formats/jpeg.hpp"
#include "crest/data/sample_source.hpp"

namespace crest {

struct ImageTransformOptions {
  bool train = true;                       // random crop and flip; false: resize and centre crop
  int64_t size = 224;                      // the crop's side: the model's input
  int64_t resize = 256;                    // validation: the shorter side before the centre crop
  double scale_lo = 0.08, scale_hi = 1.0;  // RandomResizedCrop's area fractions
  std::array<float, 3> mean{0.485f, 0.456f, 0.406f}, std{0.229f, 0.224f, 0.225f};
  // Training: decode at the smallest of libjpeg's scales that still gives the crop at least
  // `size` pixels a side (less decoding for small crops of large images); the crop's pixels then
  // differ slightly from a full decode's. Off: torchvision's pixels exactly.
  bool reduced_decode = false;
  int64_t max_pixels = int64_t{1} << 28;  // larger declared images are refused (JpegDecodeOptions)
};

struct ImageFolderOptions {
  std::string dir;    // <dir>/<class>/<image>.jpg
  int64_t limit = 0;  // the first `limit` images in order (0: all)
  ImageTransformOptions transform;
};

// The class names of an image folder: its subdirectories' names, sorted. Errors (input) name the
// directory when it is missing or holds no class directory.
std::vector<std::string> image_folder_classes(const std::string& dir);

// Errors (input) name the directory or the class directory without images.
std::shared_ptr<SampleSource> open_image_folder(const ImageFolderOptions& options);

// The transformed sample of one decoded image (the source's decode without the file): what the
// tests and the benchmark's decode figure check.
void transform_image(const RgbImage& image, const ImageTransformOptions& o, uint64_t draw_key,
                     float* x);

}  // namespace crest
