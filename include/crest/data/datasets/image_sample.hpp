// One ImageNet-style sample from its JPEG bytes, whatever holds them (a file of an image folder, a
// record of a TFRecord shard): decoded with libjpeg-turbo and transformed as torchvision does,
// into float32 [size, size, 3] channels-last. For training RandomResizedCrop(size),
// RandomHorizontalFlip and Normalize (the crop and the flip drawn from the run's seed, the epoch
// and the sample: SampleDraw); for validation Resize(resize) of the shorter side,
// CenterCrop(size) and Normalize.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

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

// The key of sample i's random draws: one stream per (seed, epoch, sample).
uint64_t image_draw_key(const SampleDraw& draw, int64_t sample);

// Decodes `jpeg` and writes its transformed sample to x. Errors (input) name `name` (the file, or
// the shard and record).
void decode_image_sample(std::span<const std::byte> jpeg, const std::string& name,
                         const ImageTransformOptions& o, uint64_t draw_key, float* x);

// The transformed sample of one decoded image (decode_image_sample without the decoding): what the
// tests and the benchmark's decode figure check.
void transform_image(const RgbImage& image, const ImageTransformOptions& o, uint64_t draw_key,
                     float* x);

}  // namespace crest
