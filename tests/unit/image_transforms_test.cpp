// The ImageNet transforms (crest/data/image_transforms.hpp): crop and bilinear resize byte for
// byte Pillow's (tests/fixtures/make_jpeg_fixtures.py: enlarging, reducing, one axis, crop then
// resize — what torchvision's Resize, CenterCrop and RandomResizedCrop do to a PIL image), the
// validation transform's sizes, RandomResizedCrop's box rule on chosen draws, and the float
// conversion with flip and normalisation.
#include "crest/data/image_transforms.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "crest/core/error.hpp"
#include "support/test_util.hpp"

namespace crest {
namespace {

std::string fixture(const std::string& name) {
  return test::source_path("tests/fixtures/jpeg/" + name);
}

std::vector<uint8_t> file_bytes(const std::string& path) {
  const std::string s = test::slurp(path);
  EXPECT_FALSE(s.empty()) << path;
  return {s.begin(), s.end()};
}

RgbImage decoded(const std::string& name) {
  const std::vector<uint8_t> b = file_bytes(fixture(name + ".jpg"));
  std::vector<std::byte> bytes(b.size());
  std::memcpy(bytes.data(), b.data(), b.size());
  return decode_jpeg(bytes, name);
}

TEST(ImageTransforms, CropAndResizeAsPillowByteForByte) {
  std::ifstream manifest(fixture("resize_manifest.txt"));
  std::string line;
  int cases = 0;
  while (std::getline(manifest, line)) {
    std::istringstream in(line);
    std::string name, source;
    CropBox box;
    int64_t height = 0, width = 0;
    in >> name >> source >> box.top >> box.left >> box.height >> box.width >> height >> width;
    const RgbImage image = decoded(source);
    const RgbImage out = resize_bilinear(crop(image, box), height, width);
    // The in-place form (no copy of the crop) gives the same bytes.
    EXPECT_EQ(resize_bilinear(image, box, height, width).pixels, out.pixels) << name;
    ASSERT_EQ(out.height, height) << name;
    ASSERT_EQ(out.width, width) << name;
    const std::vector<uint8_t> want = file_bytes(fixture("resize_" + name + ".rgb"));
    ASSERT_EQ(want.size(), out.pixels.size()) << name;
    size_t differ = 0;
    for (size_t i = 0; i < want.size(); ++i) differ += want[i] != out.pixels[i];
    EXPECT_EQ(differ, 0u) << name << ": " << differ << " of " << want.size() << " bytes differ";
    ++cases;
  }
  EXPECT_EQ(cases, 6);
}

TEST(ImageTransforms, ValidationResizesTheShorterSideThenCropsTheCentre) {
  RgbImage tall;
  tall.height = 301;
  tall.width = 200;
  tall.pixels.assign(static_cast<size_t>(301 * 200 * 3), 7);
  const RgbImage r = resize_shorter_side(tall, 256);
  EXPECT_EQ(r.width, 256);
  EXPECT_EQ(r.height, 385);                               // int(256 * 301 / 200) = int(385.28)
  EXPECT_EQ(resize_shorter_side(tall, 200).height, 301);  // already that size: unchanged
  const CropBox c = center_crop_box(385, 256, 224);
  EXPECT_EQ(c.top, 80);  // round(80.5) = 80: Python rounds half to even
  EXPECT_EQ(c.left, 16);
  EXPECT_EQ(center_crop_box(227, 225, 224).top, 2);   // round(1.5) = 2
  EXPECT_EQ(center_crop_box(227, 225, 224).left, 0);  // round(0.5) = 0
  EXPECT_THROW(center_crop_box(200, 300, 224), Error);
}

TEST(ImageTransforms, RandomResizedCropTakesTheFirstBoxThatFits) {
  CropDraws d;
  // Attempt 0: area fraction 0.08 + 0.92 * 1 would be the whole image, aspect 4/3: too wide.
  d.area[0] = 0.999999;
  d.log_ratio[0] = 0.999999;
  // Attempt 1: a quarter of the area (0.08 + 0.92 * 0.1847826 = 0.25), aspect 1 (the middle of
  // log 3/4 .. log 4/3): 50 x 50 of 100 x 100, at row 0.5 * 51 and column 0.2 * 51.
  d.area[1] = (0.25 - 0.08) / 0.92;
  d.log_ratio[1] = 0.5;
  d.row[1] = 0.5;
  d.column[1] = 0.2;
  const CropBox b = random_resized_crop_box(100, 100, d);
  EXPECT_EQ(b.height, 50);
  EXPECT_EQ(b.width, 50);
  EXPECT_EQ(b.top, 25);
  EXPECT_EQ(b.left, 10);
}

TEST(ImageTransforms, RandomResizedCropFallsBackToTheCentreClampedToTheRatios) {
  CropDraws never;  // every attempt asks for the whole area at aspect 4/3 or 3/4: never fits
  for (size_t a = 0; a < never.area.size(); ++a) {
    never.area[a] = 0.999999;
    never.log_ratio[a] = a % 2 ? 0.0 : 0.999999;
  }
  const CropBox wide = random_resized_crop_box(100, 300, never);  // ratio 3 > 4/3
  EXPECT_EQ(wide.height, 100);
  EXPECT_EQ(wide.width, 133);  // round(100 * 4/3)
  EXPECT_EQ(wide.left, 83);
  const CropBox tall = random_resized_crop_box(300, 100, never);  // ratio 1/3 < 3/4
  EXPECT_EQ(tall.width, 100);
  EXPECT_EQ(tall.height, 133);  // round(100 / (3/4))
  EXPECT_EQ(tall.top, 83);
  const CropBox square = random_resized_crop_box(90, 100, never);  // in range: the whole image
  EXPECT_EQ(square.height, 90);
  EXPECT_EQ(square.width, 100);
}

TEST(ImageTransforms, NormalisesPerChannelAndFlipsColumns) {
  RgbImage image;
  image.height = 1;
  image.width = 2;
  image.pixels = {0, 255, 51, 255, 0, 102};
  const std::array<float, 3> mean{0.5f, 0.5f, 0.2f}, std{0.5f, 0.25f, 0.1f};
  float out[6];
  normalize_to_floats(image, mean, std, false, out);
  EXPECT_FLOAT_EQ(out[0], -1.f);
  EXPECT_FLOAT_EQ(out[1], 2.f);
  EXPECT_NEAR(out[2], 0.f, 1e-6);
  normalize_to_floats(image, mean, std, true, out);
  EXPECT_FLOAT_EQ(out[0], 1.f);  // the right pixel first
  EXPECT_FLOAT_EQ(out[1], -2.f);
  EXPECT_NEAR(out[5], 0.f, 1e-6);
}

}  // namespace
}  // namespace crest
