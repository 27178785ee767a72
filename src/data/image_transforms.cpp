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

// Every output position's taps, as Pillow lays them out: the first input index, the count, and
// `stride` fixed-point weights per output (unused ones 0).
struct Taps {
  std::vector<int64_t> first;
  std::vector<int64_t> count;
  std::vector<int32_t> weights;
  int64_t stride = 0;
};

double triangle(double x) {
  x = std::abs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

// Pillow's precompute_coeffs and normalize_coeffs_8bpc for the bilinear filter (support 1),
// mapping `in_size` inputs onto `out_size` outputs over the whole extent.
Taps bilinear_taps(int64_t in_size, int64_t out_size) {
  const double scale =
      static_cast<double>(static_cast<float>(in_size)) / static_cast<double>(out_size);
  const double filter_scale = std::max(scale, 1.0);
  const double support = 1.0 * filter_scale;
  const double reciprocal = 1.0 / filter_scale;  // Pillow multiplies by it, not divides
  Taps taps;
  taps.stride = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  taps.first.resize(static_cast<size_t>(out_size));
  taps.count.resize(static_cast<size_t>(out_size));
  taps.weights.assign(static_cast<size_t>(out_size * taps.stride), 0);
  std::vector<double> w(static_cast<size_t>(taps.stride));
  for (int64_t o = 0; o < out_size; ++o) {
    const double center = (static_cast<double>(o) + 0.5) * scale;
    // Pillow's (int)(x + 0.5): rounding by truncation toward zero, kept for its bounds.
    const auto lo = std::max<int64_t>(static_cast<int64_t>(std::trunc(center - support + 0.5)), 0);
    const int64_t hi =
        std::min<int64_t>(static_cast<int64_t>(std::trunc(center + support + 0.5)), in_size);
    double sum = 0;
    for (int64_t x = lo; x < hi; ++x) {
      w[static_cast<size_t>(x - lo)] =
          triangle((static_cast<double>(x) - center + 0.5) * reciprocal);
      sum += w[static_cast<size_t>(x - lo)];
    }
    taps.first[static_cast<size_t>(o)] = lo;
    taps.count[static_cast<size_t>(o)] = hi - lo;
    int32_t* fixed_weights = taps.weights.data() + o * taps.stride;
    for (int64_t i = 0; i < hi - lo; ++i) {
      const double v = w[static_cast<size_t>(i)];
      const double k = sum != 0.0 ? v / sum : v;
      const double fixed = k * (1 << kPrecisionBits);
      fixed_weights[i] = static_cast<int32_t>(k < 0 ? -0.5 + fixed : 0.5 + fixed);
    }
  }
  return taps;
}

// Pillow's clip8: the sum's integer part, clamped to a byte.
uint8_t clip8(int32_t sum) {
  return static_cast<uint8_t>(std::clamp(sum >> kPrecisionBits, 0, 255));
}

// The horizontal pass over rows [top, top + rows) of `in`, reading its columns
// [left, left + taps' input extent): each output pixel's three sums over its taps. Integer sums:
// the same bits in any order.
RgbImage resample_rows(const RgbImage& in, int64_t top, int64_t rows, int64_t left,
                       const Taps& taps) {
  RgbImage out;
  out.height = rows;
  out.width = static_cast<int64_t>(taps.first.size());
  out.pixels.resize(static_cast<size_t>(out.height * out.width * 3));
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* row = in.at(top + r, left);
    uint8_t* dst = out.pixels.data() + r * out.width * 3;
    for (int64_t c = 0; c < out.width; ++c) {
      const uint8_t* px = row + taps.first[static_cast<size_t>(c)] * 3;
      const int32_t* w = taps.weights.data() + c * taps.stride;
      int32_t s0 = 1 << (kPrecisionBits - 1), s1 = s0, s2 = s0;
      for (int64_t i = 0; i < taps.count[static_cast<size_t>(c)]; ++i, px += 3) {
        s0 += int32_t{px[0]} * w[i];
        s1 += int32_t{px[1]} * w[i];
        s2 += int32_t{px[2]} * w[i];
      }
      dst[c * 3] = clip8(s0);
      dst[c * 3 + 1] = clip8(s1);
      dst[c * 3 + 2] = clip8(s2);
    }
  }
  return out;
}

// The vertical pass: each output row a weighted sum of whole input rows, accumulated row by row
// (contiguous, so the compiler vectorises it).
RgbImage resample_columns(const RgbImage& in, const Taps& taps) {
  RgbImage out;
  out.height = static_cast<int64_t>(taps.first.size());
  out.width = in.width;
  const auto n = static_cast<size_t>(in.width * 3);
  out.pixels.resize(static_cast<size_t>(out.height) * n);
  std::vector<int32_t> acc(n);
  for (int64_t r = 0; r < out.height; ++r) {
    std::fill(acc.begin(), acc.end(), 1 << (kPrecisionBits - 1));
    const int32_t* w = taps.weights.data() + r * taps.stride;
    for (int64_t i = 0; i < taps.count[static_cast<size_t>(r)]; ++i) {
      const uint8_t* src = in.at(taps.first[static_cast<size_t>(r)] + i, 0);
      const int32_t weight = w[i];
      for (size_t x = 0; x < n; ++x) acc[x] += int32_t{src[x]} * weight;
    }
    uint8_t* dst = out.pixels.data() + static_cast<size_t>(r) * n;
    for (size_t x = 0; x < n; ++x) dst[x] = clip8(acc[x]);
  }
  return out;
}

void check_box(const RgbImage& image, const CropBox& box) {
  if (box.top < 0 || box.left < 0 || box.height < 1 || box.width < 1 ||
      box.top + box.height > image.height || box.left + box.width > image.width)
    throw_usage("crop box outside the image");
}

// Python's round(): half to even (std::nearbyint in the default rounding mode).
int64_t python_round(double x) { return static_cast<int64_t>(std::nearbyint(x)); }

}  // namespace

RgbImage crop(const RgbImage& image, const CropBox& box) {
  check_box(image, box);
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
  return resize_bilinear(image, CropBox{0, 0, image.height, image.width}, height, width);
}

// crop(image, box) resized, without the copy of the crop: the passes read the box in place.
RgbImage resize_bilinear(const RgbImage& image, const CropBox& box, int64_t height, int64_t width) {
  if (height < 1 || width < 1) throw_usage("resize to an empty image");
  check_box(image, box);
  if (height == box.height && width == box.width) return crop(image, box);
  if (width == box.width) {
    const RgbImage rows = crop(image, box);
    return resample_columns(rows, bilinear_taps(box.height, height));
  }
  RgbImage rows =
      resample_rows(image, box.top, box.height, box.left, bilinear_taps(box.width, width));
  if (height == box.height) return rows;
  return resample_columns(rows, bilinear_taps(box.height, height));
}

RgbImage resize_shorter_side(const RgbImage& image, int64_t size, int64_t max_pixels) {
  const bool tall = image.height >= image.width;
  const int64_t shorter = tall ? image.width : image.height;
  const int64_t longer = tall ? image.height : image.width;
  if (shorter == size) return image;
  const double other_exact =
      static_cast<double>(size) * static_cast<double>(longer) / static_cast<double>(shorter);
  // A sliver (1 x 100,000 pixels is a valid JPEG) would grow without bound.
  if (other_exact * static_cast<double>(size) > static_cast<double>(max_pixels))
    throw_input("an image of " + std::to_string(image.height) + " x " +
                std::to_string(image.width) + " pixels resized to " + std::to_string(size) +
                " on its shorter side would have more than " + std::to_string(max_pixels) +
                " pixels (an aspect ratio no photograph has)");
  const auto other = static_cast<int64_t>(other_exact);
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
  // ToTensor then Normalize, (v / 255 - mean) / std in float, for each of the 256 values once.
  std::array<std::array<float, 256>, 3> table;
  for (int k = 0; k < 3; ++k)
    for (int v = 0; v < 256; ++v)
      table[static_cast<size_t>(k)][static_cast<size_t>(v)] =
          (static_cast<float>(v) / 255.f - mean[static_cast<size_t>(k)]) /
          std[static_cast<size_t>(k)];
  for (int64_t r = 0; r < image.height; ++r)
    for (int64_t c = 0; c < image.width; ++c) {
      const uint8_t* p = image.at(r, flip ? image.width - 1 - c : c);
      for (size_t k = 0; k < 3; ++k) *out++ = table[k][p[k]];
    }
}

}  // namespace crest
