// Random access to the records of an uncompressed TFRecord file (crest/data/formats/tfrecord.hpp):
// an index of record offsets built from the headers alone, and a read of one record by offset.
#include <array>
#include <cstdio>

#include "crest/core/error.hpp"
#include "crest/data/formats/crc32c.hpp"
#include "crest/data/formats/tfrecord.hpp"
#include "formats/file_io.hpp"
#include "formats/little_endian.hpp"

namespace crest {
namespace {

using formats_io::load_le32;
using formats_io::load_le64;

constexpr size_t kHeaderBytes = 12;  // length, its masked CRC

std::string at_record(const std::string& path, size_t record, uint64_t offset) {
  return path + ": record " + std::to_string(record) + " at byte " + std::to_string(offset);
}

}  // namespace

std::vector<TfRecordSpan> index_tfrecord_file(const std::string& path) {
  const formats_io::InputFile f(path);
  std::vector<TfRecordSpan> spans;
  std::array<std::byte, kHeaderBytes> header{};
  uint64_t offset = 0;
  while (offset < f.size()) {
    const size_t k = spans.size();
    if (f.size() - offset < kHeaderBytes) {
      throw_input(at_record(path, k, offset) + ": the file ends inside the record's header (" +
                  std::to_string(f.size() - offset) + " of 12 bytes)");
    }
    f.read_exact_at(offset, header.data(), header.size(), "TFRecord header");
    if (k == 0 && header[0] == std::byte{0x1f} && header[1] == std::byte{0x8b} &&
        crc32c_mask(crc32c(header.data(), 8)) != load_le32(header.data() + 8))
      throw_input(path +
                  ": GZIP-compressed; records of a compressed file cannot be read by "
                  "offset (decompress it: TFRecord shards of images are stored plain)");
    if (crc32c_mask(crc32c(header.data(), 8)) != load_le32(header.data() + 8))
      throw_input(at_record(path, k, offset) +
                  ": the length's CRC does not match (not a TFRecord "
                  "file, or a corrupt one)");
    const uint64_t length = load_le64(header.data());
    const uint64_t left = f.size() - offset - kHeaderBytes;
    if (left < 4 || length > left - 4)
      throw_input(at_record(path, k, offset) + ": declares " + std::to_string(length) +
                  " bytes of data but the file has " + std::to_string(left) +
                  " bytes left (a truncated file)");
    spans.push_back({offset, length});
    offset += kTfRecordFramingBytes + length;
  }
  return spans;
}

void read_tfrecord_at(const std::string& path, const TfRecordSpan& span,
                      std::vector<std::byte>& data) {
  const formats_io::InputFile f(path);
  const uint64_t total = kTfRecordFramingBytes + span.length;
  if (span.offset > f.size() || total > f.size() - span.offset)
    throw_input(path + ": a record at byte " + std::to_string(span.offset) + " of " +
                std::to_string(span.length) + " bytes lies past the end of the file (" +
                std::to_string(f.size()) + " bytes; it changed after it was indexed)");
  // One read of the framed record into `data` (its capacity reused), then the framing dropped.
  data.resize(static_cast<size_t>(total));
  f.read_exact_at(span.offset, data.data(), data.size(), "TFRecord record");
  const std::string where = path + ": the record at byte " + std::to_string(span.offset);
  if (crc32c_mask(crc32c(data.data(), 8)) != load_le32(data.data() + 8) ||
      load_le64(data.data()) != span.length)
    throw_input(where + ": its header changed after the file was indexed, or is corrupt");
  const auto n = static_cast<size_t>(span.length);
  if (crc32c_mask(crc32c(data.data() + kHeaderBytes, n)) !=
      load_le32(data.data() + kHeaderBytes + n))
    throw_input(where + ": the data's CRC does not match (a corrupt record)");
  data.erase(data.begin() + static_cast<std::ptrdiff_t>(kHeaderBytes + n), data.end());
  data.erase(data.begin(), data.begin() + static_cast<std::ptrdiff_t>(kHeaderBytes));
}

}  // namespace crest
