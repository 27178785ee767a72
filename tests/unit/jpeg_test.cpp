// JPEG decoding (crest/data/formats/jpeg.hpp): byte for byte Pillow's decoding of the same files
// (tests/fixtures/make_jpeg_fixtures.py: 4:2:0, 4:2:2, 4:4:4, progressive, grayscale), reduced
// scales, an encode round trip, and the files it refuses by name — not a JPEG, truncated, CMYK,
// hostile declared dimensions, corrupt data — without crashing.
#include "crest/data/formats/jpeg.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "crest/core/error.hpp"
#include "support/test_util.hpp"

namespace crest {
namespace {

std::vector<std::byte> file_bytes(const std::string& path) {
  const std::string s = test::slurp(path);
  EXPECT_FALSE(s.empty()) << path;
  std::vector<std::byte> b(s.size());
  std::memcpy(b.data(), s.data(), s.size());
  return b;
}

std::string fixture(const std::string& name) {
  return test::source_path("tests/fixtures/jpeg/" + name);
}

// The message of the Error decode_jpeg throws for `bytes` (and that it is bad input).
std::string refusal(const std::vector<std::byte>& bytes, const JpegDecodeOptions& o = {}) {
  try {
    decode_jpeg(bytes, "bad.jpg", o);
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "decoded";
  return "";
}

TEST(Jpeg, DecodesEveryKindAsPillowDoesByteForByte) {
  std::ifstream manifest(fixture("manifest.txt"));
  std::string line;
  int cases = 0;
  while (std::getline(manifest, line)) {
    std::istringstream in(line);
    std::string name, kind;
    int64_t height = 0, width = 0;
    in >> name >> height >> width >> kind;
    const std::vector<std::byte> jpeg = file_bytes(fixture(name + ".jpg"));
    const JpegHeader h = read_jpeg_header(jpeg, name);
    EXPECT_EQ(h.height, height) << name;
    EXPECT_EQ(h.width, width) << name;
    EXPECT_EQ(h.grayscale, kind == "gray") << name;
    const RgbImage image = decode_jpeg(jpeg, name);
    ASSERT_EQ(image.height, height) << name;
    ASSERT_EQ(image.width, width) << name;
    const std::vector<std::byte> want = file_bytes(fixture(name + ".rgb"));
    ASSERT_EQ(want.size(), image.pixels.size()) << name;
    EXPECT_EQ(std::memcmp(want.data(), image.pixels.data(), want.size()), 0) << name;
    ++cases;
  }
  EXPECT_EQ(cases, 5);
}

TEST(Jpeg, DecodesAtTheSmallestScaleThatKeepsWhatIsAsked) {
  const std::vector<std::byte> jpeg = file_bytes(fixture("rgb422.jpg"));  // 64 rows x 48 columns
  const auto size = [&](int64_t rows, int64_t cols) {
    JpegDecodeOptions o;
    o.min_height = rows;
    o.min_width = cols;
    const RgbImage image = decode_jpeg(jpeg, "rgb422", o);
    EXPECT_EQ(image.pixels.size(), static_cast<size_t>(image.height * image.width * 3));
    return std::make_pair(image.height, image.width);
  };
  EXPECT_EQ(size(0, 0), std::make_pair(int64_t{64}, int64_t{48}));     // no minimum: whole
  EXPECT_EQ(size(1, 1), std::make_pair(int64_t{8}, int64_t{6}));       // 1/8
  EXPECT_EQ(size(30, 10), std::make_pair(int64_t{32}, int64_t{24}));   // 4/8
  EXPECT_EQ(size(33, 10), std::make_pair(int64_t{40}, int64_t{30}));   // 5/8
  EXPECT_EQ(size(64, 48), std::make_pair(int64_t{64}, int64_t{48}));   // whole
  EXPECT_EQ(size(100, 48), std::make_pair(int64_t{64}, int64_t{48}));  // never enlarged
}

TEST(Jpeg, AnEncodedImageDecodesCloseToIt) {
  RgbImage image;
  image.height = 31;
  image.width = 45;
  for (int64_t r = 0; r < image.height; ++r)
    for (int64_t c = 0; c < image.width; ++c)
      for (int k = 0; k < 3; ++k)
        image.pixels.push_back(static_cast<uint8_t>(40 + r * 2 + c * 2 + int64_t{k} * 20));
  const RgbImage back = decode_jpeg(encode_jpeg(image, 95), "round trip");
  ASSERT_EQ(back.height, image.height);
  ASSERT_EQ(back.width, image.width);
  double mean_error = 0;
  for (size_t i = 0; i < image.pixels.size(); ++i)
    mean_error += std::abs(int{back.pixels[i]} - int{image.pixels[i]});
  EXPECT_LT(mean_error / static_cast<double>(image.pixels.size()), 3.0);
  EXPECT_THROW(encode_jpeg(image, 0), Error);
}

TEST(Jpeg, RefusesFilesThatAreNotJpegsOrAreCutShort) {
  EXPECT_NE(refusal({}).find("bad.jpg: not a JPEG file"), std::string::npos);
  const std::vector<std::byte> png{std::byte{0x89}, std::byte{'P'}, std::byte{'N'}, std::byte{'G'}};
  EXPECT_NE(refusal(png).find("not a JPEG file"), std::string::npos);
  const std::vector<std::byte> jpeg = file_bytes(fixture("rgb420.jpg"));
  // Cut inside the scan data: libjpeg would pad the rest gray; crest refuses, as Pillow does.
  const std::vector<std::byte> half(jpeg.begin(),
                                    jpeg.begin() + static_cast<long>(jpeg.size() / 2));
  EXPECT_NE(refusal(half).find("bad.jpg: truncated JPEG data"), std::string::npos);
  // Cut inside the header.
  const std::vector<std::byte> head(jpeg.begin(), jpeg.begin() + 40);
  EXPECT_NE(refusal(head).find("bad.jpg:"), std::string::npos);
  // Every cut of the file is refused or decoded, never a crash.
  for (size_t n = 0; n < jpeg.size(); n += 7) {
    const std::vector<std::byte> cut(jpeg.begin(), jpeg.begin() + static_cast<long>(n));
    try {
      decode_jpeg(cut, "cut.jpg");
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("cut.jpg: "), std::string::npos) << e.what();
    }
  }
}

// The start-of-frame segment's height and width (SOF0/SOF2: FF C0/C2, length, precision, then
// height and width big-endian) set to the given values.
std::vector<std::byte> with_declared_size(std::vector<std::byte> jpeg, int height, int width) {
  for (size_t i = 2; i + 9 < jpeg.size(); ++i)
    if (jpeg[i] == std::byte{0xFF} &&
        (jpeg[i + 1] == std::byte{0xC0} || jpeg[i + 1] == std::byte{0xC2})) {
      jpeg[i + 5] = std::byte(height >> 8);
      jpeg[i + 6] = std::byte(height & 0xFF);
      jpeg[i + 7] = std::byte(width >> 8);
      jpeg[i + 8] = std::byte(width & 0xFF);
      return jpeg;
    }
  ADD_FAILURE() << "no start-of-frame segment";
  return jpeg;
}

TEST(Jpeg, RefusesHostileDeclaredSizesCmykAndCorruptData) {
  const std::vector<std::byte> jpeg = file_bytes(fixture("rgb420.jpg"));
  const std::string huge = refusal(with_declared_size(jpeg, 65000, 65000));
  EXPECT_NE(huge.find("declares 65000 x 65000 pixels, over the limit"), std::string::npos) << huge;
  JpegDecodeOptions small;
  small.max_pixels = 1000;
  EXPECT_NE(refusal(jpeg, small).find("53 x 37 pixels, over the limit of 1000"), std::string::npos);
  EXPECT_NE(refusal(file_bytes(fixture("cmyk.jpg"))).find("a CMYK JPEG"), std::string::npos);
  // A declared size larger than the data: the scan ends early.
  EXPECT_NE(refusal(with_declared_size(jpeg, 400, 400)).find("bad.jpg: "), std::string::npos);
  // Scan data overwritten with noise: decoded as what it says or refused, never a crash.
  std::vector<std::byte> noisy = jpeg;
  for (size_t i = noisy.size() / 2; i + 2 < noisy.size(); i += 3) noisy[i] = std::byte(i * 37);
  try {
    decode_jpeg(noisy, "noisy.jpg");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("noisy.jpg: "), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace crest
