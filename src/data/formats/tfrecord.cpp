#include "crest/data/formats/tfrecord.hpp"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdio>
#include <cstring>
#include <optional>
#include <utility>

#include "crest/core/atomic_file.hpp"
#include "crest/core/error.hpp"
#include "crest/data/formats/crc32c.hpp"
#include "formats/file_io.hpp"
#include "formats/little_endian.hpp"

namespace crest {

namespace {

// Large reads keep system calls rare; a CosmoFlow file (~16 MB) is a handful of them.
constexpr size_t kChunkBytes = size_t{1} << 20;
// Record data is read and checksummed in spans this size: each span is still in the core's L2
// cache when its CRC is computed, so the CRC costs no second trip through memory. Measured on
// the development VM (1 GiB of page-cached files): 256 KiB spans read+CRC 3-4x faster than 8 MiB.
constexpr size_t kCrcSpanBytes = size_t{256} << 10;
// Reads at least this large skip the bounce buffer and land in the caller's memory directly.
constexpr size_t kDirectReadBytes = size_t{64} << 10;
// When the stream length is unknown (gzip), a record buffer grows ahead of the data that actually
// arrived by as much again (at least kMinGrowBytes, at most kGrowStepBytes), so a hostile length
// field cannot make us allocate more than twice what the stream really inflates to, which gzip
// bounds by 1032 times the file size (a fixed 64 MiB step let a 100-byte file allocate 64 MiB).
constexpr size_t kMinGrowBytes = size_t{64} << 10;
constexpr size_t kGrowStepBytes = size_t{64} << 20;
// zlib counts in 32-bit uInt: feed it at most this much at once.
constexpr size_t kMaxZlibSpan = size_t{1} << 30;

[[noreturn]] void fail(const std::string& what) { throw_input(what); }

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

using formats_io::load_le32;
using formats_io::load_le64;
using formats_io::store_le32;
using formats_io::store_le64;

// The bytes as stored (plain records or a gzip stream), from a file or from memory.
class StoredBytes {
 public:
  virtual ~StoredBytes() = default;
  // Copies up to n bytes into dst; returns fewer only at the end.
  virtual size_t read(std::byte* dst, size_t n) = 0;
  // The next stretch of stored bytes without copying where possible; empty at the end.
  virtual std::span<const std::byte> next_chunk() = 0;
  virtual uint64_t size() const = 0;
  virtual uint64_t consumed() const = 0;
};

class FileBytes final : public StoredBytes {
 public:
  explicit FileBytes(const std::string& path) : file_(path), buffer_(kChunkBytes) {}

  size_t read(std::byte* dst, size_t n) override {
    size_t done = take_buffered(dst, n);
    if (n - done >= kDirectReadBytes) {
      // Big reads (record data) go straight into the caller's memory: no bounce copy.
      const size_t got = file_.read_some(dst + done, n - done);
      consumed_ += got;
      return done + got;
    }
    if (done < n && refill()) done += take_buffered(dst + done, n - done);
    return done;
  }

  std::span<const std::byte> next_chunk() override {
    if (pos_ == len_ && !refill()) return {};
    std::span<const std::byte> out(buffer_.data() + pos_, len_ - pos_);
    consumed_ += len_ - pos_;
    pos_ = len_;
    return out;
  }

  uint64_t size() const override { return file_.size(); }
  uint64_t consumed() const override { return consumed_; }

  // The first bytes of the file, without moving the read position (format detection).
  size_t peek(std::byte* dst, size_t n) const {
    const size_t k = static_cast<size_t>(std::min<uint64_t>(n, file_.size()));
    file_.read_exact_at(0, dst, k, "the format probe");
    return k;
  }

 private:
  size_t take_buffered(std::byte* dst, size_t n) {
    const size_t k = std::min(n, len_ - pos_);
    if (k) std::memcpy(dst, buffer_.data() + pos_, k);
    pos_ += k;
    consumed_ += k;
    return k;
  }
  bool refill() {
    pos_ = 0;
    len_ = file_.read_some(buffer_.data(), buffer_.size());
    return len_ > 0;
  }

  formats_io::InputFile file_;
  std::vector<std::byte> buffer_;
  size_t pos_ = 0, len_ = 0;
  uint64_t consumed_ = 0;
};

class MemoryBytes final : public StoredBytes {
 public:
  explicit MemoryBytes(std::span<const std::byte> bytes) : bytes_(bytes) {}

  size_t read(std::byte* dst, size_t n) override {
    const size_t k = std::min(n, bytes_.size() - pos_);
    if (k) std::memcpy(dst, bytes_.data() + pos_, k);
    pos_ += k;
    return k;
  }
  std::span<const std::byte> next_chunk() override {
    const size_t k = std::min(kMaxZlibSpan, bytes_.size() - pos_);
    const auto out = bytes_.subspan(pos_, k);
    pos_ += k;
    return out;
  }
  uint64_t size() const override { return bytes_.size(); }
  uint64_t consumed() const override { return pos_; }

 private:
  std::span<const std::byte> bytes_;
  size_t pos_ = 0;
};

// The uncompressed record stream.
class RecordStream {
 public:
  virtual ~RecordStream() = default;
  // Fills up to n bytes; fewer only at the end of the stream.
  virtual size_t read(std::byte* dst, size_t n) = 0;
  // Bytes left, where that is known without decoding (plain storage).
  virtual std::optional<uint64_t> bytes_left() const = 0;
};

class PlainStream final : public RecordStream {
 public:
  explicit PlainStream(std::unique_ptr<StoredBytes> in) : in_(std::move(in)) {}
  size_t read(std::byte* dst, size_t n) override { return in_->read(dst, n); }
  std::optional<uint64_t> bytes_left() const override { return in_->size() - in_->consumed(); }

 private:
  std::unique_ptr<StoredBytes> in_;
};

// Inflates one gzip member after another, straight into the caller's buffer.
class GzipStream final : public RecordStream {
 public:
  GzipStream(std::unique_ptr<StoredBytes> in, std::string name)
      : in_(std::move(in)), name_(std::move(name)) {
    // 16 + MAX_WBITS: gzip wrapper only (header and CRC-32/ISIZE trailer checked by zlib).
    if (inflateInit2(&zs_, 16 + MAX_WBITS) != Z_OK)
      throw_runtime(name_ + ": cannot initialise zlib's inflate");
  }
  ~GzipStream() override { inflateEnd(&zs_); }
  GzipStream(const GzipStream&) = delete;
  GzipStream& operator=(const GzipStream&) = delete;

  size_t read(std::byte* dst, size_t n) override {
    size_t produced = 0;
    while (produced < n && !finished_) {
      if (zs_.avail_in == 0) {
        const auto chunk = in_->next_chunk();
        if (chunk.empty()) {
          if (in_member_)
            fail(name_ + ": gzip stream truncated: member " + std::to_string(members_ + 1) +
                 " ends after " + std::to_string(in_->size()) +
                 " compressed bytes without its end (file cut short?)");
          finished_ = true;
          break;
        }
        // zlib does not write through next_in; its API is just not const-correct.
        zs_.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(chunk.data()));
        zs_.avail_in = static_cast<uInt>(chunk.size());
      }
      if (!in_member_) {
        // Only another gzip member may follow a member: anything else is trailing garbage.
        if (members_ > 0 && zs_.next_in[0] != 0x1f)
          fail(name_ + ": " + std::to_string(in_->size() - compressed_offset()) +
               " bytes of trailing garbage after gzip member " + std::to_string(members_) +
               " (at compressed offset " + std::to_string(compressed_offset()) + ")");
        in_member_ = true;
        member_out_ = 0;
      }
      const size_t want = std::min(n - produced, kMaxZlibSpan);
      zs_.next_out = reinterpret_cast<Bytef*>(dst + produced);
      zs_.avail_out = static_cast<uInt>(want);
      const int rc = inflate(&zs_, Z_NO_FLUSH);
      const size_t got = want - zs_.avail_out;
      produced += got;
      member_out_ += got;
      if (rc == Z_STREAM_END) {
        in_member_ = false;
        ++members_;
        inflateReset(&zs_);
      } else if (rc == Z_MEM_ERROR) {
        throw_runtime(name_ + ": out of memory while inflating");
      } else if (rc != Z_OK && !(rc == Z_BUF_ERROR && zs_.avail_in == 0)) {
        std::string what = zs_.msg ? zs_.msg : "zlib error " + std::to_string(rc);
        if (members_ > 0 && member_out_ == 0)
          what += "; the bytes after gzip member " + std::to_string(members_) +
                  " are not a gzip member (trailing garbage?)";
        fail(name_ + ": corrupt gzip stream in member " + std::to_string(members_ + 1) +
             " near compressed offset " + std::to_string(compressed_offset()) + ": " + what);
      }
    }
    return produced;
  }

  std::optional<uint64_t> bytes_left() const override { return std::nullopt; }

 private:
  uint64_t compressed_offset() const { return in_->consumed() - zs_.avail_in; }

  std::unique_ptr<StoredBytes> in_;
  std::string name_;
  z_stream zs_{};
  bool in_member_ = false;
  bool finished_ = false;
  uint64_t members_ = 0;
  uint64_t member_out_ = 0;
};

// gzip iff the gzip magic 1f 8b comes first. A plain file starts with its first record's length,
// which could begin with those two bytes too (a length of 35,615 + k * 65,536); a plain file
// is then recognised by its length CRC, which a gzip header matches with odds of 2^-32.
bool looks_gzip(const std::byte* p, size_t n) {
  if (n < 2 || p[0] != std::byte{0x1f} || p[1] != std::byte{0x8b}) return false;
  return n < 12 || crc32c_mask(crc32c(p, 8)) != load_le32(p + 8);
}

}  // namespace

const char* tfrecord_compression_name(TfRecordCompression c) {
  switch (c) {
    case TfRecordCompression::none:
      return "none";
    case TfRecordCompression::gzip:
      return "gzip";
    case TfRecordCompression::detect:
      return "detect";
  }
  return "?";
}

TfRecordCompression parse_tfrecord_compression(const std::string& text) {
  if (text.empty() || text == "none" || text == "NONE") return TfRecordCompression::none;
  if (text == "gzip" || text == "GZIP") return TfRecordCompression::gzip;
  if (text == "detect" || text == "auto") return TfRecordCompression::detect;
  throw_input("unknown TFRecord compression '" + text +
              "' (expected none, gzip or detect; TensorFlow's \"\" and \"GZIP\" also work)");
}

struct TfRecordReader::Impl {
  std::string name;
  TfRecordCompression compression = TfRecordCompression::none;
  std::unique_ptr<RecordStream> stream;
  uint64_t records = 0;
  uint64_t offset = 0;
  bool ended = false;
  // After a defect the stream position is meaningless: every later call repeats the error.
  std::optional<Error> failure;

  Impl(std::string n, std::unique_ptr<StoredBytes> in, TfRecordCompression c, const std::byte* head,
       size_t head_bytes)
      : name(std::move(n)), compression(c) {
    if (compression == TfRecordCompression::detect)
      compression =
          looks_gzip(head, head_bytes) ? TfRecordCompression::gzip : TfRecordCompression::none;
    if (compression == TfRecordCompression::gzip)
      stream = std::make_unique<GzipStream>(std::move(in), name);
    else
      stream = std::make_unique<PlainStream>(std::move(in));
  }

  std::string where() const {
    return name + ": record " + std::to_string(records) +
           (compression == TfRecordCompression::gzip ? " at uncompressed byte offset "
                                                     : " at byte offset ") +
           std::to_string(offset);
  }

  // Reads from the stream; a gzip error gets the record and offset it interrupted.
  size_t read(std::byte* dst, size_t n) {
    try {
      return stream->read(dst, n);
    } catch (const Error& e) {
      std::string what = e.what();
      if (what.rfind(name + ": ", 0) == 0) what.erase(0, name.size() + 2);
      throw Error(e.kind(), where() + ": " + what);
    }
  }

  bool next(std::vector<std::byte>& record) {
    if (failure) throw *failure;
    if (ended) return false;
    try {
      return next_record(record);
    } catch (const Error& e) {
      failure = e;
      throw;
    }
  }

  bool next_record(std::vector<std::byte>& record) {
    std::array<std::byte, 12> header{};
    const size_t got = read(header.data(), header.size());
    if (got == 0) {
      ended = true;
      return false;
    }
    if (got < header.size())
      fail(where() + ": truncated inside the 12-byte length header (the file ends after " +
           std::to_string(got) + " bytes of it)");
    const uint64_t length = load_le64(header.data());
    const uint32_t stored_length_crc = load_le32(header.data() + 8);
    const uint32_t length_crc = crc32c_mask(crc32c(header.data(), 8));
    if (stored_length_crc != length_crc)
      fail(where() + ": length CRC mismatch (stored " + hex32(stored_length_crc) + ", computed " +
           hex32(length_crc) + "): the length field is corrupt or this is not a TFRecord file");

    // A length is trusted only as far as the bytes that are really there.
    const std::optional<uint64_t> left = stream->bytes_left();
    if (left && length > *left)
      fail(where() + ": truncated inside the data: the length field says " +
           std::to_string(length) + " bytes, only " + std::to_string(*left) + " follow");
    if (left && *left - length < 4)
      fail(where() + ": truncated inside the data CRC (only " + std::to_string(*left - length) +
           " of its 4 bytes follow the data)");
    if (length > static_cast<uint64_t>(SIZE_MAX / 2))
      fail(where() + ": record length " + std::to_string(length) + " is impossibly large");

    const size_t n = static_cast<size_t>(length);
    size_t filled = 0;
    uint32_t crc = 0;
    do {
      const size_t step = std::clamp(filled, kMinGrowBytes, kGrowStepBytes);
      const size_t target = left ? n : std::min(n, filled + step);
      record.resize(target);
      while (filled < target) {
        const size_t want = std::min(target - filled, kCrcSpanBytes);
        const size_t got_data = read(record.data() + filled, want);
        crc = crc32c(record.data() + filled, got_data, crc);
        filled += got_data;
        if (got_data < want)
          fail(where() + ": truncated inside the data (" + std::to_string(filled) + " of " +
               std::to_string(length) + " bytes present)");
      }
    } while (filled < n);

    std::array<std::byte, 4> trailer{};
    const size_t got_crc = read(trailer.data(), trailer.size());
    if (got_crc < trailer.size())
      fail(where() + ": truncated inside the data CRC (only " + std::to_string(got_crc) +
           " of its 4 bytes follow the data)");
    const uint32_t stored_data_crc = load_le32(trailer.data());
    const uint32_t data_crc = crc32c_mask(crc);
    if (stored_data_crc != data_crc)
      fail(where() + ": data CRC mismatch (stored " + hex32(stored_data_crc) + ", computed " +
           hex32(data_crc) + ")");
    offset += kTfRecordFramingBytes + length;
    ++records;
    return true;
  }
};

TfRecordReader::TfRecordReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

TfRecordReader::TfRecordReader(const std::string& path, TfRecordCompression compression) {
  auto in = std::make_unique<FileBytes>(path);
  std::array<std::byte, 12> head{};
  const size_t head_bytes = in->peek(head.data(), head.size());
  impl_ = std::make_unique<Impl>(path, std::move(in), compression, head.data(), head_bytes);
}

TfRecordReader TfRecordReader::from_memory(std::span<const std::byte> bytes,
                                           const std::string& name,
                                           TfRecordCompression compression) {
  return TfRecordReader(std::make_unique<Impl>(name, std::make_unique<MemoryBytes>(bytes),
                                               compression, bytes.data(), bytes.size()));
}

TfRecordReader::~TfRecordReader() = default;
TfRecordReader::TfRecordReader(TfRecordReader&&) noexcept = default;
TfRecordReader& TfRecordReader::operator=(TfRecordReader&&) noexcept = default;

bool TfRecordReader::next(std::vector<std::byte>& record) { return impl_->next(record); }
const std::string& TfRecordReader::name() const { return impl_->name; }
TfRecordCompression TfRecordReader::compression() const { return impl_->compression; }
uint64_t TfRecordReader::records_read() const { return impl_->records; }
uint64_t TfRecordReader::offset() const { return impl_->offset; }

void read_single_record(const std::string& path, TfRecordCompression compression,
                        std::vector<std::byte>& record) {
  TfRecordReader reader(path, compression);
  if (!reader.next(record))
    fail(path + ": holds no records, expected exactly 1 (one sample per file)");
  // Reading on to the end also verifies the gzip trailer (CRC-32 and length of the stream).
  std::vector<std::byte> extra;
  if (reader.next(extra)) {
    while (reader.next(extra)) {
    }
    fail(path + ": holds " + std::to_string(reader.records_read()) +
         " records, expected exactly 1 (one sample per file)");
  }
}

std::vector<std::byte> read_single_record(const std::string& path,
                                          TfRecordCompression compression) {
  std::vector<std::byte> record;
  read_single_record(path, compression, record);
  return record;
}

struct TfRecordWriter::Impl {
  AtomicOutputFile out;
  TfRecordCompression compression;
  std::vector<std::byte> buffer;
  size_t used = 0;
  z_stream zs{};
  bool deflating = false;
  bool closed = false;
  bool broken = false;  // a failed write left the stream in an unknown state
  uint64_t records = 0;

  Impl(const std::string& path, TfRecordCompression c, int level)
      : out(path), compression(c), buffer(kChunkBytes) {
    if (compression == TfRecordCompression::gzip) {
      // TensorFlow's GZIP options: window 2^15 with the gzip wrapper (+16), memLevel 9,
      // default strategy.
      if (deflateInit2(&zs, level, Z_DEFLATED, 16 + MAX_WBITS, 9, Z_DEFAULT_STRATEGY) != Z_OK)
        throw_runtime(path + ": cannot initialise zlib's deflate");
      deflating = true;
    }
  }
  ~Impl() {
    if (deflating) deflateEnd(&zs);
  }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  void flush_buffer() {
    if (used) out.write(buffer.data(), used);
    used = 0;
  }

  void emit_plain(const void* data, size_t n) {
    if (n == 0) return;  // an empty record's data may be a null pointer
    if (n >= buffer.size()) {
      flush_buffer();
      out.write(data, n);  // big records go straight to the file
      return;
    }
    if (used + n > buffer.size()) flush_buffer();
    std::memcpy(buffer.data() + used, data, n);
    used += n;
  }

  // Runs deflate until the input is consumed (flush = Z_NO_FLUSH) or the stream is finished.
  void run_deflate(int flush) {
    for (;;) {
      if (used == buffer.size()) flush_buffer();
      zs.next_out = reinterpret_cast<Bytef*>(buffer.data() + used);
      zs.avail_out = static_cast<uInt>(buffer.size() - used);
      const int rc = deflate(&zs, flush);
      used = buffer.size() - zs.avail_out;
      if (rc == Z_STREAM_END) return;
      if (rc != Z_OK && rc != Z_BUF_ERROR)
        throw_runtime(out.path() + ": deflate failed (zlib error " + std::to_string(rc) + ")");
      if (flush == Z_NO_FLUSH && zs.avail_in == 0) return;
    }
  }

  void emit(const void* data, size_t n) {
    if (!deflating) return emit_plain(data, n);
    const auto* p = static_cast<const Bytef*>(data);
    while (n > 0) {
      const size_t k = std::min(n, kMaxZlibSpan);
      zs.next_in = const_cast<Bytef*>(p);  // zlib does not write through next_in
      zs.avail_in = static_cast<uInt>(k);
      run_deflate(Z_NO_FLUSH);
      p += k;
      n -= k;
    }
  }
};

TfRecordWriter::TfRecordWriter(const std::string& path, TfRecordCompression compression,
                               int gzip_level) {
  if (compression == TfRecordCompression::detect)
    throw_input(path + ": a TFRecord writer needs compression none or gzip, not detect");
  if (gzip_level < -1 || gzip_level > 9)
    throw_input(path + ": gzip level " + std::to_string(gzip_level) +
                " is out of range (-1 for zlib's default, or 0..9)");
  impl_ = std::make_unique<Impl>(path, compression, gzip_level);
}

TfRecordWriter::~TfRecordWriter() = default;  // an unclosed writer's temporary file is removed

void TfRecordWriter::write(const void* data, size_t n) {
  Impl& w = *impl_;
  if (w.closed) throw_runtime("internal error: " + w.out.path() + ": write after close");
  if (w.broken) throw_input(w.out.path() + ": cannot write after an earlier write failed");
  if (n > 0 && data == nullptr) throw_input(w.out.path() + ": record data is null");
  std::array<std::byte, 12> header{};
  store_le64(header.data(), n);
  store_le32(header.data() + 8, crc32c_mask(crc32c(header.data(), 8)));
  std::array<std::byte, 4> trailer{};
  store_le32(trailer.data(), crc32c_mask(crc32c(data, n)));
  try {
    w.emit(header.data(), header.size());
    w.emit(data, n);
    w.emit(trailer.data(), trailer.size());
  } catch (...) {
    w.broken = true;
    throw;
  }
  ++w.records;
}

void TfRecordWriter::close() {
  Impl& w = *impl_;
  if (w.closed) return;
  if (w.broken) throw_input(w.out.path() + ": cannot close after an earlier write failed");
  try {
    if (w.deflating) {
      w.zs.next_in = nullptr;
      w.zs.avail_in = 0;
      w.run_deflate(Z_FINISH);
    }
    w.flush_buffer();
    w.out.commit();
  } catch (...) {
    w.broken = true;
    throw;
  }
  w.closed = true;
}

const std::string& TfRecordWriter::path() const { return impl_->out.path(); }
uint64_t TfRecordWriter::records_written() const { return impl_->records; }

}  // namespace crest
