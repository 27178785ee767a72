// Building blocks of hostile data files for the tests of readers: a TFRecord length header with
// a valid CRC for any length, and gzip compression of any bytes.
#pragma once
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "crest/data/formats/crc32c.hpp"

namespace crest::test {

// A TFRecord length header claiming `length` bytes, its CRC right (so readers believe it).
inline std::vector<std::byte> tfrecord_length_header(uint64_t length) {
  std::vector<std::byte> h(12);
  for (int i = 0; i < 8; ++i) h[i] = static_cast<std::byte>(length >> (8 * i));
  const uint32_t crc = crc32c_mask(crc32c(h.data(), 8));
  for (int i = 0; i < 4; ++i) h[8 + i] = static_cast<std::byte>(crc >> (8 * i));
  return h;
}

// One gzip member holding `in`.
inline std::vector<std::byte> gzip_bytes(const std::vector<std::byte>& in) {
  std::vector<std::byte> out(compressBound(static_cast<uLong>(in.size())) + 64);
  z_stream z{};
  deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

}  // namespace crest::test
