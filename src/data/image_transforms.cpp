#include "crest/data/image_transforms.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "crest/core/error.hpp"

namespace crest {
namespace {

// Pillow's fixed point (libImaging/Resample.c): coefficients scaled by 2^22, so a sum of 8-bit
// values times them fits an int32 with two bits to spare.
constexpr int kPrecisionBits = 32 - 8 - 2;

// One output position's taps: the first input index and the fixed-point weights.
struct Taps {
  int64_t first = 0;
  std::vector<int32_t> weights;
};

double triangle(double x) {
  x = std::abs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

// Pillow's precompute_coeffs and normalize_coeffs_8bpc for the bilinear filter (support 1),
// mapping `in_size` inputs onto `out_size` outputs over the whole extent.
std::vector<Taps> bilinear_taps(int64_t in_size, int64_t out_size) {
  const double scale =
      static_cast<double>(static_cast<float>(in_size)) / static_cast<double>(out_size);
  const double filter_scale = std::max(scale, 1.0);
  const double support = 1.0 * filter_scale;
  const double reciprocal = 1.0 / filter_scale;  // Pillow multiplies by it, not divides
  std::vector<Taps> taps(static_cast<size_t>(out_size));
  for (int64_t o = 0; o < out_size; ++o) {
    const double center = (static_cast<double>(o) + 0.5) * scale;
    // Pillow's (int)(x + 0.5): rounding by truncation toward zero, kept for its bounds.
    const auto lo = std::max<int64_t>(static_cast<int64_t>(std::trunc(center - support + 0.5)), 0);
    const int64_t hi =
        std::min<int64_t>(static_cast<int64_t>(std::trunc(center + support + 0.5)), in_size);
    std::vector<double> w;
    double sum = 0;
    for (int64_t x = lo; x < hi; ++x) {
      w.push_back(triangle((static_cast<double>(x) - center + 0.5) * reciprocal));
      sum += w.back();
    }
    Taps& t = taps[static_cast<size_t>(o)];
    t.first = lo;
    for (double v : w) {
      const double k = sum != 0.0 ? v / sum : v;
      const double fixed = k * (1 << kPrecisionBits);
      t.weights.push_back(static_cast<int32_t>(k < 0 ? -0.5 + fixed : 0.5 + fixed));
    }
  }
  return taps;
}

// Pillow's clip8: the sum's integer part, clamped to a byte.
uint8_t clip8(int32_t sum) {
  return static_cast<uint8_t>(std::clamp(sum >> kPrecisionBits, 0, 255));
}

// One pass of an RGB image: along each row (`along_columns`: the taps index columns, the width
// changes) or along each column (the taps index rows, the height changes).
RgbImage resample_pass(const RgbImage& in, const std::vector<Taps>& taps, bool along_columns) {
  RgbImage out;
  out.height = along_columns ? in.height : static_cast<int64_t>(taps.size());
  out.width = along_columns ? static_cast<int64_t>(taps.size()) : in.width;
  out.pixels.resize(static_cast<size_t>(out.height * out.width * 3));
  for (int64_t r = 0; r < out.height; ++r)
    for (int64_t c = 0; c < out.width; ++c) {
      const Taps& t = taps[static_cast<size_t>(along_columns ? c : r)];
      for (int k = 0; k < 3; ++k) {
        int32_t sum = 1 << (kPrecisionBits - 1);
        for (size_t i = 0; i < t.weights.size(); ++i) {
          const int64_t at = t.first + static_cast<int64_t>(i);
          sum += int32_t{along_columns ? in.at(r, at)[k] : in.at(at, c)[k]} * t.weights[i];
        }
        out.pixels[static_cast<size_t>((r * out.width + c) * 3 + k)] = clip8(sum);
      }
    }
  return out;
}

// Python's round(): half to even (std::nearbyint in the default rounding mode).
int64_t python_round(double x) { return static_cast<int64_t>(std::nearbyint(x)); }

}  // namespace

RgbImage crop(const RgbImage& image, const CropBox& box) {
  if (box.top < 0 || box.left < 0 || box.height < 1 || box.width < 1 ||
      box.top + box.height > image.height || box.left + box.width > image.width)
    throw_usage("crop box outside the image");
  RgbImage out;
  out.height = box.height;
  out.width = box.width;
  out.pixels.resize(static_cast<size_t>(box.height * box.width * 3));
  for (int64_t r = 0; r < box.height; ++r)
    std::copy_n(image.at(box.top + r, box.left), box.width * 3,
                out.pixels.begin() + r * box.width * 3);
  return out;
}

// Pillow's ImagingResample: a horizontal pass where the width changes, then a vertical one where
// the height does (with the whole image as the box, the vertical pass reads every row the
// horizontal pass wrote).
RgbImage resize_bilinear(const RgbImage& image, int64_t height, int64_t width) {
  if (height < 1 || width < 1) throw_usage("resize to an empty image");
  if (height == image.height && width == image.width) return image;
  RgbImage t = image;
  if (width != image.width) t = resample_pass(t, bilinear_taps(image.width, width), true);
  if (height != image.height) t = resample_pass(t, bilinear_taps(image.height, height), false);
  return t;
}

RgbImage resize_shorter_side(const RgbImage& image, int64_t size) {
  const bool tall = image.height >= image.width;
  const int64_t shorter = tall ? image.width : image.height;
  const int64_t longer = tall ? image.height : image.width;
  if (shorter == size) return image;
  const auto other = static_cast<int64_t>(static_cast<double>(size) * static_cast<double>(longer) /
                                          static_cast<double>(shorter));
  return tall ? resize_bilinear(image, other, size) : resize_bilinear(image, size, other);
}

CropBox center_crop_box(int64_t height, int64_t width, int64_t crop_size) {
  if (crop_size > height || crop_size > width) throw_usage("a centre crop larger than the image");
  return {python_round(static_cast<double>(height - crop_size) / 2.0),
          python_round(static_cast<double>(width - crop_size) / 2.0), crop_size, crop_size};
}

CropBox random_resized_crop_box(int64_t height, int64_t width, const CropDraws& draws,
                                double scale_lo, double scale_hi, double ratio_lo,
                                double ratio_hi) {
  const double area = static_cast<double>(height * width);
  const double log_lo = std::log(ratio_lo), log_hi = std::log(ratio_hi);
  for (size_t a = 0; a < draws.area.size(); ++a) {
    const double target = area * (scale_lo + (scale_hi - scale_lo) * draws.area[a]);
    const double aspect = std::exp(log_lo + (log_hi - log_lo) * draws.log_ratio[a]);
    const int64_t w = python_round(std::sqrt(target * aspect));
    const int64_t h = python_round(std::sqrt(target / aspect));
    if (w > 0 && w <= width && h > 0 && h <= height) {
      const auto top = static_cast<int64_t>(draws.row[a] * static_cast<double>(height - h + 1));
      const auto left = static_cast<int64_t>(draws.column[a] * static_cast<double>(width - w + 1));
      return {top, left, h, w};
    }
  }
  const double in_ratio = static_cast<double>(width) / static_cast<double>(height);
  int64_t w = width, h = height;
  if (in_ratio < ratio_lo)
    h = python_round(static_cast<double>(w) / ratio_lo);
  else if (in_ratio > ratio_hi)
    w = python_round(static_cast<double>(h) * ratio_hi);
  return {(height - h) / 2, (width - w) / 2, h, w};
}

void normalize_to_floats(const RgbImage& image, const std::array<float, 3>& mean,
                         const std::array<float, 3>& std, bool flip, float* out) {
  for (int64_t r = 0; r < image.height; ++r)
    for (int64_t c = 0; c < image.width; ++c) {
      const uint8_t* p = image.at(r, flip ? image.width - 1 - c : c);
      for (int k = 0; k < 3; ++k) *out++ = (static_cast<float>(p[k]) / 255.f - mean[k]) / std[k];
    }
}

}  // namespace crest
