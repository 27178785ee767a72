// JPEG images through libjpeg-turbo's TurboJPEG API (Debian's libturbojpeg): the header, a decode
// to 8-bit RGB — at a reduced scale where libjpeg's DCT scaling can give fewer pixels than the
// file holds and still at least what the caller needs — and an encode (crest datagen).
//
// Decoding is libjpeg's default (accurate integer IDCT, fancy upsampling), as Pillow's and
// torchvision's loaders decode: the same library gives the same pixels. Every error names the
// file; hostile files (truncated, not a JPEG, declared dimensions beyond the pixel limit, a
// progressive file with more scans than any encoder writes) are refused before or during
// decoding, never crash. Grayscale images decode to RGB with the gray level in all three
// channels (Pillow's convert("RGB")); CMYK/YCCK images are refused (docs/data-formats.md).
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace crest {

struct JpegHeader {
  int64_t height = 0, width = 0;
  bool grayscale = false;
  bool cmyk = false;  // CMYK or YCCK: refused by decode_jpeg
};

struct JpegDecodeOptions {
  // The decode needs at least this many rows and columns (a crop's size): libjpeg scales by the
  // smallest of its factors (8/8 down to 1/8) that keeps both. 0: the full size.
  int64_t min_height = 0, min_width = 0;
  // Declared images larger than this are refused before any pixel is decoded (an ImageNet image
  // has under 20 M pixels; a hostile header declares up to 65535 x 65535).
  int64_t max_pixels = int64_t{1} << 28;
};

// An 8-bit RGB image, rows of width * 3 bytes (HWC).
struct RgbImage {
  int64_t height = 0, width = 0;
  std::vector<uint8_t> pixels;
  const uint8_t* at(int64_t row, int64_t col) const {
    return pixels.data() + (row * width + col) * 3;
  }
};

// The header of `bytes` (a whole JPEG file). Throws crest::Error (input) naming `name` when it is
// not a JPEG or its header is cut short.
JpegHeader read_jpeg_header(std::span<const std::byte> bytes, const std::string& name);

// Decodes `bytes` to RGB. Throws crest::Error (input) naming `name` on any defect: not a JPEG,
// truncated data ("premature end"), CMYK, declared size over options.max_pixels, a corrupt
// stream libjpeg cannot decode. Warnings libjpeg recovers from (extraneous bytes before a marker)
// are accepted, as Pillow accepts them.
RgbImage decode_jpeg(std::span<const std::byte> bytes, const std::string& name,
                     const JpegDecodeOptions& options = {});

// Encodes an RGB image (4:2:0 chroma subsampling, baseline) at `quality` (1-100).
std::vector<std::byte> encode_jpeg(const RgbImage& image, int quality);

}  // namespace crest
