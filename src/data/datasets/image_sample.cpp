#include "crest/data/datasets/image_sample.hpp"

#include <algorithm>

#include "crest/core/error.hpp"
#include "crest/core/hash_rng.hpp"
#include "crest/data/image_transforms.hpp"

namespace crest {
namespace {

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

// The crop drawn on the image's full size, decoded at the smallest scale that keeps it at least
// `size` pixels a side, and mapped onto the decoded pixels.
void decode_reduced(std::span<const std::byte> jpeg, const std::string& name,
                    const ImageTransformOptions& t, uint64_t key, float* x) {
  const JpegHeader h = read_jpeg_header(jpeg, name);
  const CropBox box =
      random_resized_crop_box(h.height, h.width, crop_draws(key), t.scale_lo, t.scale_hi);
  JpegDecodeOptions d;
  d.max_pixels = t.max_pixels;
  d.min_height = (t.size * h.height + box.height - 1) / box.height;
  d.min_width = (t.size * h.width + box.width - 1) / box.width;
  const RgbImage image = decode_jpeg(jpeg, name, d);
  CropBox scaled;
  scaled.top = box.top * image.height / h.height;
  scaled.left = box.left * image.width / h.width;
  scaled.height = std::max<int64_t>(
      1, std::min(box.height * image.height / h.height, image.height - scaled.top));
  scaled.width =
      std::max<int64_t>(1, std::min(box.width * image.width / h.width, image.width - scaled.left));
  normalize_to_floats(resize_bilinear(image, scaled, t.size, t.size), t.mean, t.std, flip_draw(key),
                      x);
}

}  // namespace

uint64_t image_draw_key(const SampleDraw& draw, int64_t sample) {
  return rng::splitmix64(
      rng::splitmix64(draw.seed ^ rng::splitmix64(static_cast<uint64_t>(draw.epoch))) ^
      static_cast<uint64_t>(sample));
}

void decode_image_sample(std::span<const std::byte> jpeg, const std::string& name,
                         const ImageTransformOptions& o, uint64_t draw_key, float* x) {
  if (o.train && o.reduced_decode) return decode_reduced(jpeg, name, o, draw_key, x);
  JpegDecodeOptions d;
  d.max_pixels = o.max_pixels;
  const RgbImage image = decode_jpeg(jpeg, name, d);
  try {
    transform_image(image, o, draw_key, x);
  } catch (const Error& e) {
    throw_input(name + ": " + e.what());
  }
}

void transform_image(const RgbImage& image, const ImageTransformOptions& o, uint64_t draw_key,
                     float* x) {
  if (o.train) {
    const CropBox box = random_resized_crop_box(image.height, image.width, crop_draws(draw_key),
                                                o.scale_lo, o.scale_hi);
    normalize_to_floats(resize_bilinear(image, box, o.size, o.size), o.mean, o.std,
                        flip_draw(draw_key), x);
    return;
  }
  const RgbImage resized = resize_shorter_side(image, o.resize);
  const CropBox box = center_crop_box(resized.height, resized.width, o.size);
  normalize_to_floats(crop(resized, box), o.mean, o.std, false, x);
}

}  // namespace crest
