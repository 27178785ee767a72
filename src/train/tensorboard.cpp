#include "crest/train/tensorboard.hpp"

#include <fcntl.h>
#include <limits.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string_view>
#include <utility>

#include "crest/core/error.hpp"
#include "crest/data/formats/crc32c.hpp"

namespace crest {

namespace {

// --- Protobuf wire format, just what an Event needs (all integers little-endian). ---------------
// Kept here rather than shared with src/data/formats/example.cpp: that file decodes untrusted
// tf.train.Example records; this one only ever encodes a handful of known fields.

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void put_key(std::string& out, uint32_t field, WireType wt) {
  put_varint(out, (uint64_t{field} << 3) | wt);
}

void put_double(std::string& out, uint32_t field, double v) {
  put_key(out, field, kFixed64);
  put_le(out, std::bit_cast<uint64_t>(v), 8);
}

void put_float(std::string& out, uint32_t field, float v) {
  put_key(out, field, kFixed32);
  put_le(out, std::bit_cast<uint32_t>(v), 4);
}

// int64 fields are plain varints of the two's complement (negative values take 10 bytes).
void put_int64(std::string& out, uint32_t field, int64_t v) {
  put_key(out, field, kVarint);
  put_varint(out, static_cast<uint64_t>(v));
}

void put_bytes(std::string& out, uint32_t field, std::string_view bytes) {
  put_key(out, field, kLengthDelimited);
  put_varint(out, bytes.size());
  out.append(bytes);
}

// Field numbers of tensorflow/core/util/event.proto and tensorflow/core/framework/summary.proto.
constexpr uint32_t kEventWallTime = 1;
constexpr uint32_t kEventStep = 2;
constexpr uint32_t kEventFileVersion = 3;
constexpr uint32_t kEventSummary = 5;
constexpr uint32_t kSummaryValue = 1;
constexpr uint32_t kValueTag = 1;
constexpr uint32_t kValueSimpleValue = 2;

// What every reader checks the first record for ("brain.Event:" prefix, version 2).
constexpr std::string_view kFileVersion = "brain.Event:2";

std::string hostname() {
  char buf[HOST_NAME_MAX + 1] = {};
  if (::gethostname(buf, sizeof buf) != 0 || buf[0] == '\0') return "localhost";
  buf[HOST_NAME_MAX] = '\0';  // gethostname need not terminate a truncated name
  return buf;
}

// Keeps names unique among the writers of one process that start within the same second (e.g.
// a training and a validation writer); hostname and pid separate processes and nodes.
std::atomic<uint64_t> g_file_counter{0};

}  // namespace

double TensorBoardWriter::now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

TensorBoardWriter::TensorBoardWriter(const std::string& logdir) {
  std::error_code ec;
  std::filesystem::create_directories(logdir, ec);
  if (ec) throw_input(logdir + ": cannot create the TensorBoard log directory: " + ec.message());
  if (!std::filesystem::is_directory(logdir, ec))
    throw_input(logdir + ": cannot create the TensorBoard log directory: not a directory");

  const double start = now();
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%010lld", static_cast<long long>(start));
  const std::string prefix = (std::filesystem::path(logdir) / "events.out.tfevents.").string() +
                             seconds + "." + hostname() + "." + std::to_string(::getpid()) + ".";
  // O_EXCL: never append to, or truncate, a file another writer owns. A name can only be taken
  // already by a process with our hostname and pid (containers sharing a directory), so a few
  // more counter values find a free one.
  for (int attempt = 0; attempt < 100; ++attempt) {
    path_ = prefix + std::to_string(g_file_counter.fetch_add(1));
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
    if (fd_ >= 0 || errno != EEXIST) break;
  }
  if (fd_ < 0) throw_io(path_, "cannot create the TensorBoard event file", errno);

  std::string event;
  put_double(event, kEventWallTime, start);
  put_bytes(event, kEventFileVersion, kFileVersion);
  append_event(event);
  try {
    flush();
  } catch (...) {
    // No destructor runs for a constructor that throws: release the descriptor here, and leave
    // no file that holds no events behind.
    ::close(std::exchange(fd_, -1));
    ::unlink(path_.c_str());
    throw;
  }
}

TensorBoardWriter::~TensorBoardWriter() { close_or_warn(); }

void TensorBoardWriter::close_or_warn() noexcept {
  try {
    close();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "crest: warning: TensorBoard events lost: %s\n", e.what());
  }
}

TensorBoardWriter::TensorBoardWriter(TensorBoardWriter&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      pending_(std::move(other.pending_)),
      committed_(other.committed_),
      failed_(other.failed_) {
  other.pending_.clear();
}

TensorBoardWriter& TensorBoardWriter::operator=(TensorBoardWriter&& other) noexcept {
  if (this != &other) {
    close_or_warn();
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    pending_ = std::move(other.pending_);
    other.pending_.clear();
    committed_ = other.committed_;
    failed_ = other.failed_;
  }
  return *this;
}

const std::string& TensorBoardWriter::path() const { return path_; }

void TensorBoardWriter::check_open() const {
  if (fd_ < 0) throw_runtime("internal error: " + path_ + ": TensorBoard writer used after close");
  if (failed_)
    throw_input(path_ +
                ": an earlier write to this TensorBoard event file failed; no more "
                "events are written to it");
}

void TensorBoardWriter::scalar(const std::string& tag, int64_t step, double value,
                               double wall_time_s) {
  check_open();
  std::string summary_value;
  put_bytes(summary_value, kValueTag, tag);
  put_float(summary_value, kValueSimpleValue, static_cast<float>(value));
  std::string summary;
  put_bytes(summary, kSummaryValue, summary_value);
  std::string event;
  put_double(event, kEventWallTime, wall_time_s);
  put_int64(event, kEventStep, step);
  put_bytes(event, kEventSummary, summary);
  append_event(event);
  if (pending_.size() > kAutoFlushBytes) flush();
}

// TFRecord framing (see crest/data/formats/tfrecord.hpp): length, masked CRC32C of the length,
// data, masked CRC32C of the data. Written here rather than through TfRecordWriter, whose
// atomic temp-file-and-rename publishing is exactly what an event file must not do (see the
// header).
void TensorBoardWriter::append_event(const std::string& event) {
  const size_t start = pending_.size();
  put_le(pending_, event.size(), 8);
  put_le(pending_, crc32c_mask(crc32c(pending_.data() + start, 8)), 4);
  pending_.append(event);
  put_le(pending_, crc32c_mask(crc32c(event.data(), event.size())), 4);
}

void TensorBoardWriter::flush() {
  check_open();
  size_t done = 0;
  while (done < pending_.size()) {
    const ssize_t w = ::write(fd_, pending_.data() + done, pending_.size() - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      // Cut the file back to its last whole record so that readers see a clean end, not a
      // torn record; whether or not that works, this writer stops here.
      failed_ = true;
      if (::ftruncate(fd_, static_cast<off_t>(committed_)) != 0) {
        // Nothing more to do: TensorBoard stops reading at the torn record.
      }
      pending_.clear();
      throw_io(path_, "cannot write to the TensorBoard event file", err);
    }
    done += static_cast<size_t>(w);
  }
  committed_ += pending_.size();
  pending_.clear();
}

void TensorBoardWriter::close() {
  if (fd_ < 0) return;
  std::string error;
  if (!failed_) {
    try {
      flush();
    } catch (const Error& e) {
      error = e.what();
    }
  }
  if (::close(std::exchange(fd_, -1)) != 0 && error.empty())
    error = path_ + ": cannot close the TensorBoard event file: " + errno_text(errno);
  pending_.clear();
  if (!error.empty()) throw_input(error);
}

}  // namespace crest
