// The image transforms of ImageNet training, as torchvision applies them to Pillow images:
// crop, bilinear resize (Pillow's resampling, bit for bit: an antialiasing triangle filter whose
// support grows with the reduction, 8-bit fixed-point coefficients, horizontal then vertical
// pass), RandomResizedCrop's box, the validation transform's resize of the shorter side and
// centre crop, and the float conversion with horizontal flip and per-channel normalisation.
#pragma once
#include <array>
#include <cstdint>

#include "crest/data/formats/jpeg.hpp"

namespace crest {

struct CropBox {
  int64_t top = 0, left = 0, height = 0, width = 0;
};

// Pixels [top, top + height) x [left, left + width) of `image` (inside it).
RgbImage crop(const RgbImage& image, const CropBox& box);

// Pillow's Image.resize((width, height), Image.BILINEAR) of the whole image.
RgbImage resize_bilinear(const RgbImage& image, int64_t height, int64_t width);
// The same of crop(image, box), reading the box in place (no copy of the crop).
RgbImage resize_bilinear(const RgbImage& image, const CropBox& box, int64_t height, int64_t width);

// torchvision's Resize(size) for one int: the shorter side to `size`, the longer
// int(size * long / short); then CenterCrop(crop): the crop's offsets round((extent - crop) / 2)
// with Python's round (half to even). The validation transform (256, 224). Throws crest::Error
// (input) when the resized image would exceed `max_pixels` (an extreme aspect ratio).
RgbImage resize_shorter_side(const RgbImage& image, int64_t size,
                             int64_t max_pixels = int64_t{1} << 26);
CropBox center_crop_box(int64_t height, int64_t width, int64_t crop_size);

// The uniform draws one RandomResizedCrop takes: per attempt (10 at most) the area fraction's and
// the log aspect ratio's, and the box's row and column.
struct CropDraws {
  std::array<double, 10> area{}, log_ratio{}, row{}, column{};  // each in [0, 1)
};

// torchvision's RandomResizedCrop.get_params(scale, ratio) on an image of height x width with
// these draws: the first of 10 attempts whose box (area fraction in [scale_lo, scale_hi), aspect
// in [ratio_lo, ratio_hi) log-uniformly, sides int(round(...))) fits, at a uniformly drawn place;
// else the centre crop of the image clamped to the ratio range.
CropBox random_resized_crop_box(int64_t height, int64_t width, const CropDraws& draws,
                                double scale_lo = 0.08, double scale_hi = 1.0,
                                double ratio_lo = 3.0 / 4.0, double ratio_hi = 4.0 / 3.0);

// ToTensor + Normalize(mean, std), written channels-last (HWC) as float32: (v / 255 - mean) /
// std per channel; `flip` mirrors the columns (RandomHorizontalFlip).
void normalize_to_floats(const RgbImage& image, const std::array<float, 3>& mean,
                         const std::array<float, 3>& std, bool flip, float* out);

}  // namespace crest
