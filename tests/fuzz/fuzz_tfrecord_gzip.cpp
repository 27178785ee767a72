// TFRecord framing inside gzip. The first byte picks what the rest is:
//   even: the gzip file itself (corrupt streams, truncated members, trailing bytes);
//   odd:  TFRecord framing that the harness gzips first, in one or two members (the split point
//         taken from the second byte), so the mutations reach the framing behind a valid stream,
//         which raw mutation of deflate data almost never does.
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "crest/core/error.hpp"
#include "crest/data/formats/tfrecord.hpp"

namespace {

// One gzip member of `n` bytes at `p`, appended to `out`.
void append_gzip_member(const uint8_t* p, size_t n, std::vector<std::byte>& out) {
  z_stream z{};
  if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return;
  const size_t start = out.size();
  out.resize(start + deflateBound(&z, n) + 32);
  z.next_in = const_cast<Bytef*>(p);
  z.avail_in = static_cast<uInt>(n);
  z.next_out = reinterpret_cast<Bytef*>(out.data() + start);
  z.avail_out = static_cast<uInt>(out.size() - start);
  deflate(&z, Z_FINISH);
  out.resize(start + z.total_out);
  deflateEnd(&z);
}

void read_all(std::span<const std::byte> bytes) {
  try {
    auto reader = crest::TfRecordReader::from_memory(bytes, "fuzz.tfrecord.gz",
                                                     crest::TfRecordCompression::gzip);
    std::vector<std::byte> record;
    while (reader.next(record)) {
    }
  } catch (const crest::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint8_t* rest = data + 1;
  const size_t n = size - 1;
  if ((data[0] & 1) == 0) {
    read_all({reinterpret_cast<const std::byte*>(rest), n});
    return 0;
  }
  const size_t split = data[1] < 128 ? n : n * (data[1] - 128) / 128;
  std::vector<std::byte> gz;
  append_gzip_member(rest, split, gz);
  if (split < n) append_gzip_member(rest + split, n - split, gz);
  read_all(gz);
  return 0;
}
