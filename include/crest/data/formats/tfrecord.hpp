// TFRecord files: TensorFlow's record container (SPEC.md §3), plain or GZIP-compressed.
//
// A record is: uint64 length (little-endian) | uint32 masked CRC32C of those 8 bytes | data |
// uint32 masked CRC32C of data. With GZIP compression one gzip stream wraps the whole file;
// like TensorFlow and gzip(1) the reader also accepts several concatenated gzip members.
//
// The reader trusts nothing: both CRCs of every record are checked, a length is checked against
// the bytes actually left before anything is allocated for it (for gzip, where the size is not
// known ahead, the record buffer grows in 64 MiB steps as data arrives), and every defect
// (truncation, CRC mismatch, corrupt gzip, bytes after the last gzip member) is a crest::Error
// (input) that names the file, the record index and its byte offset (in the uncompressed
// stream). The writer is atomic: the target path either keeps its old contents or holds the
// complete new file.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace crest {

enum class TfRecordCompression {
  none,
  gzip,
  // Reading only: gzip iff the file starts with the gzip magic 1f 8b (unless its first 12
  // bytes are a valid TFRecord length header, which a plain file with a first record of
  // 35,615 + k * 65,536 bytes has).
  detect,
};

const char* tfrecord_compression_name(TfRecordCompression c);  // "none", "gzip", "detect"
// Accepts TensorFlow's option strings ("", "GZIP") and crest's ("none", "gzip", "detect",
// "auto"); throws crest::Error (input) otherwise.
TfRecordCompression parse_tfrecord_compression(const std::string& text);

// Bytes of framing around each record's data: 8 length + 4 length CRC + 4 data CRC.
inline constexpr size_t kTfRecordFramingBytes = 16;

// Reads the records of one file (or of an in-memory copy of one) front to back. Move-only.
class TfRecordReader {
 public:
  explicit TfRecordReader(const std::string& path,
                          TfRecordCompression compression = TfRecordCompression::detect);
  // Reads from `bytes`, which the caller keeps alive and unchanged for the reader's lifetime
  // (e.g. a file staged in memory). `name` stands for the file in error messages.
  static TfRecordReader from_memory(std::span<const std::byte> bytes, const std::string& name,
                                    TfRecordCompression compression = TfRecordCompression::detect);
  ~TfRecordReader();
  TfRecordReader(TfRecordReader&&) noexcept;
  TfRecordReader& operator=(TfRecordReader&&) noexcept;
  TfRecordReader(const TfRecordReader&) = delete;
  TfRecordReader& operator=(const TfRecordReader&) = delete;

  // Reads the next record into `record` (resized to its length). Returns false at a clean end
  // of file (for gzip: after the last member's trailer was verified); throws crest::Error
  // (input) on any defect, and again on every later call (the position is lost). Passing the
  // same vector every time avoids reallocating it.
  bool next(std::vector<std::byte>& record);

  const std::string& name() const;
  TfRecordCompression compression() const;  // none or gzip (detect is resolved on open)
  uint64_t records_read() const;
  // Uncompressed bytes consumed so far (framing included).
  uint64_t offset() const;

 private:
  struct Impl;
  explicit TfRecordReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The one record of a one-sample file (CosmoFlow). Throws crest::Error (input) if the file holds
// no record or more than one (naming how many), or on any defect.
std::vector<std::byte> read_single_record(
    const std::string& path, TfRecordCompression compression = TfRecordCompression::detect);
// Same, into a caller-owned vector whose capacity is reused across calls.
void read_single_record(const std::string& path, TfRecordCompression compression,
                        std::vector<std::byte>& record);

// Where one record's data lies in an uncompressed TFRecord file: what a reader of many records
// per file (ImageNet's shards) needs to read record k alone.
struct TfRecordSpan {
  uint64_t offset = 0;  // of the record's 12-byte header
  uint64_t length = 0;  // of its data
};

// The records of an uncompressed file, found by reading each 12-byte header (its length CRC
// checked) and skipping the data: no data is read, so the data CRCs are checked by
// read_tfrecord_at. Throws crest::Error (input) naming the file, the record and its offset on a
// bad length CRC, a record cut by the end of the file, or a GZIP file (no offsets to index).
std::vector<TfRecordSpan> index_tfrecord_file(const std::string& path);

// Reads the data of the record at `span` of `path` (from index_tfrecord_file) into `data`, both
// CRCs checked. Throws crest::Error (input) naming the file and the offset.
void read_tfrecord_at(const std::string& path, const TfRecordSpan& span,
                      std::vector<std::byte>& data);

// Writes records to `path` atomically: a temporary file next to it is written, and close()
// fsyncs it and renames it into place. Destroying a writer that was not closed removes the
// temporary file and leaves `path` as it was (an exception mid-write never publishes a
// partial file). GZIP output is one standard gzip member (readable by gzip(1), Python's gzip,
// TensorFlow); `gzip_level` is zlib's: -1 (Z_DEFAULT_COMPRESSION, level 6, TensorFlow's
// default) or 0..9.
class TfRecordWriter {
 public:
  explicit TfRecordWriter(const std::string& path,
                          TfRecordCompression compression = TfRecordCompression::none,
                          int gzip_level = -1);
  ~TfRecordWriter();
  TfRecordWriter(const TfRecordWriter&) = delete;
  TfRecordWriter& operator=(const TfRecordWriter&) = delete;

  void write(const void* data, size_t n);
  void write(std::span<const std::byte> record) { write(record.data(), record.size()); }
  // Finishes the stream and publishes the file. Throws crest::Error (input) on I/O failure.
  void close();

  const std::string& path() const;
  uint64_t records_written() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace crest
