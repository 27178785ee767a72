#include "crest/data/formats/jpeg.hpp"

#include <turbojpeg.h>

#include <cctype>
#include <cstring>
#include <memory>

#include "crest/core/error.hpp"

namespace crest {
namespace {

// A TurboJPEG handle, destroyed with its scope.
struct Handle {
  tjhandle h;
  explicit Handle(tjhandle handle) : h(handle) {
    if (!h) throw_runtime("TurboJPEG could not allocate a handle");
  }
  ~Handle() { tjDestroy(h); }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
};

const unsigned char* bytes_of(std::span<const std::byte> b) {
  return reinterpret_cast<const unsigned char*>(b.data());
}

// Every JPEG starts with the SOI marker FF D8 and its next marker's FF.
void require_jpeg_signature(std::span<const std::byte> b, const std::string& name) {
  if (b.size() < 3 || b[0] != std::byte{0xFF} || b[1] != std::byte{0xD8} || b[2] != std::byte{0xFF})
    throw_input(name + ": not a JPEG file (it does not start with the JPEG marker FF D8 FF)");
}

JpegHeader header_with(tjhandle h, std::span<const std::byte> b, const std::string& name) {
  require_jpeg_signature(b, name);
  int width = 0, height = 0, subsampling = 0, colorspace = 0;
  if (tjDecompressHeader3(h, bytes_of(b), static_cast<unsigned long>(b.size()), &width, &height,
                          &subsampling, &colorspace) != 0)
    throw_input(name + ": unreadable JPEG header (" + tjGetErrorStr2(h) + ")");
  JpegHeader out;
  out.height = height;
  out.width = width;
  out.grayscale = colorspace == TJCS_GRAY;
  out.cmyk = colorspace == TJCS_CMYK || colorspace == TJCS_YCCK;
  return out;
}

// The smallest of libjpeg's scales M/8 (M <= 8) that keeps at least min rows and columns.
tjscalingfactor decode_scale(const JpegHeader& h, const JpegDecodeOptions& o) {
  tjscalingfactor best{1, 1};
  if (o.min_height <= 0 && o.min_width <= 0) return best;  // the full size
  int count = 0;
  const tjscalingfactor* factors = tjGetScalingFactors(&count);
  for (int i = 0; factors && i < count; ++i) {
    const tjscalingfactor f = factors[i];
    const bool smaller =
        static_cast<int64_t>(f.num) * best.denom < static_cast<int64_t>(best.num) * f.denom;
    if (smaller && TJSCALED(h.height, f) >= o.min_height && TJSCALED(h.width, f) >= o.min_width)
      best = f;
  }
  return best;
}

std::string dimensions(int64_t height, int64_t width) {
  return std::to_string(width) + " x " + std::to_string(height);
}

}  // namespace

JpegHeader read_jpeg_header(std::span<const std::byte> bytes, const std::string& name) {
  const Handle h(tjInitDecompress());
  return header_with(h.h, bytes, name);
}

RgbImage decode_jpeg(std::span<const std::byte> bytes, const std::string& name,
                     const JpegDecodeOptions& options) {
  const Handle h(tjInitDecompress());
  const JpegHeader header = header_with(h.h, bytes, name);
  if (header.cmyk)
    throw_input(name +
                ": a CMYK JPEG; crest decodes RGB and grayscale JPEGs only (convert it, "
                "e.g. with Pillow's convert(\"RGB\"))");
  if (header.height * header.width > options.max_pixels)
    throw_input(name + ": declares " + dimensions(header.height, header.width) + " pixels, over " +
                "the limit of " + std::to_string(options.max_pixels) + " pixels per image");
  const tjscalingfactor scale = decode_scale(header, options);
  RgbImage image;
  image.height = TJSCALED(header.height, scale);
  image.width = TJSCALED(header.width, scale);
  image.pixels.resize(static_cast<size_t>(image.height * image.width * 3));
  // LIMITSCANS: a progressive file of more than 500 scans (no encoder writes one; a hostile one
  // makes libjpeg loop for minutes) is an error.
  const int rc = tjDecompress2(h.h, bytes_of(bytes), static_cast<unsigned long>(bytes.size()),
                               image.pixels.data(), static_cast<int>(image.width), 0,
                               static_cast<int>(image.height), TJPF_RGB, TJFLAG_LIMITSCANS);
  if (rc != 0) {
    const std::string message = tjGetErrorStr2(h.h);
    // A warning leaves a whole image, except where the data ends early ("Premature end of JPEG
    // file", "premature end of data segment": a cut file, or a header declaring more rows than
    // the scan holds): libjpeg fills the rest gray, crest refuses it as truncated.
    std::string lower = message;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const bool truncated = lower.find("premature end") != std::string::npos;
    if (tjGetErrorCode(h.h) != TJERR_WARNING || truncated)
      throw_input(name + ": " + (truncated ? "truncated JPEG data (" : "corrupt JPEG data (") +
                  message + ")");
  }
  return image;
}

std::vector<std::byte> encode_jpeg(const RgbImage& image, int quality) {
  if (quality < 1 || quality > 100)
    throw_usage("JPEG quality must be 1 to 100, got " + std::to_string(quality));
  const Handle h(tjInitCompress());
  unsigned char* out = nullptr;
  unsigned long size = 0;
  if (tjCompress2(h.h, image.pixels.data(), static_cast<int>(image.width), 0,
                  static_cast<int>(image.height), TJPF_RGB, &out, &size, TJSAMP_420, quality,
                  0) != 0) {
    const std::string message = tjGetErrorStr2(h.h);
    tjFree(out);
    throw_runtime("JPEG encoding of a " + dimensions(image.height, image.width) +
                  " image failed: " + message);
  }
  std::vector<std::byte> bytes(size);
  std::memcpy(bytes.data(), out, size);
  tjFree(out);
  return bytes;
}

}  // namespace crest
