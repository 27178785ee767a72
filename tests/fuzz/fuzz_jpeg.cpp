// JPEG files, as an image dataset meets them: the header, a full decode, a decode at a reduced
// scale (the first input byte picks the minimum size), and on what decodes the ImageNet
// transforms — a RandomResizedCrop drawn from the input, the resize, normalisation and flip, and
// the validation resize and centre crop. Declared sizes are capped at 2^22 pixels so one input
// cannot allocate past the harness's memory limit.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "crest/core/error.hpp"
#include "crest/data/formats/jpeg.hpp"
#include "crest/data/image_transforms.hpp"

namespace {

void transform(const crest::RgbImage& image, uint8_t draw) {
  crest::CropDraws d;
  for (size_t a = 0; a < d.area.size(); ++a) {
    d.area[a] = static_cast<double>((draw * 37 + a * 11) % 256) / 256.0;
    d.log_ratio[a] = static_cast<double>((draw * 53 + a * 7) % 256) / 256.0;
    d.row[a] = static_cast<double>((draw * 17 + a) % 256) / 256.0;
    d.column[a] = static_cast<double>((draw * 29 + a * 3) % 256) / 256.0;
  }
  const crest::CropBox box = crest::random_resized_crop_box(image.height, image.width, d);
  const crest::RgbImage crop = crest::resize_bilinear(crest::crop(image, box), 16, 16);
  std::vector<float> x(16 * 16 * 3);
  crest::normalize_to_floats(crop, {0.5f, 0.5f, 0.5f}, {0.25f, 0.25f, 0.25f}, draw & 1, x.data());
  const crest::RgbImage resized = crest::resize_shorter_side(image, 18, int64_t{1} << 20);
  crest::crop(resized, crest::center_crop_box(resized.height, resized.width, 16));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data + 1), size - 1);
  crest::JpegDecodeOptions o;
  o.max_pixels = int64_t{1} << 22;
  try {
    crest::read_jpeg_header(bytes, "input");
    transform(crest::decode_jpeg(bytes, "input", o), data[0]);
    o.min_height = data[0] % 64;
    o.min_width = data[0] / 4;
    crest::decode_jpeg(bytes, "input", o);
  } catch (const crest::Error&) {
  }
  return 0;
}
