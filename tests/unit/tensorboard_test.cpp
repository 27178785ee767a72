// TensorBoard event files: the name, the TFRecord framing (read back through crest's own
// TfRecordReader, which checks both CRCs of every record), the Event protos decoded by hand
// here, byte-exact encodings checked against what the Python protobuf library serializes, and
// the failure paths (unwritable directory, write failure, use after failure or close).
// tests/interop/tensorboard_interop.py reads the file of WritesInteropFile with TensorBoard.
#include "crest/train/tensorboard.hpp"

#include <gtest/gtest.h>
#include <limits.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "crest/core/error.hpp"
#include "crest/data/formats/tfrecord.hpp"
#include "support/file_size_limit.hpp"
#include "unit/data_formats_test_util.hpp"

namespace crest {
namespace {

using crest::test::FileSizeLimit;

using test::expect_input_error;
using test::from_hex;
using test::ScratchDir;

struct ScalarValue {
  std::string tag;
  float value = 0;
};

// One tensorflow.Event as far as the writer fills it in.
struct DecodedEvent {
  std::optional<double> wall_time;
  std::optional<int64_t> step;
  std::optional<std::string> file_version;
  bool has_summary = false;
  std::vector<ScalarValue> values;
};

// A minimal protobuf reader for the test: every malformed or unexpected byte is a failure.
class Wire {
 public:
  explicit Wire(std::string_view bytes) : p_(bytes) {}
  bool done() const { return p_.empty(); }

  uint64_t varint() {
    uint64_t v = 0;
    for (int i = 0; i < 10; ++i) {
      if (p_.empty()) throw std::runtime_error("truncated varint");
      const auto b = static_cast<uint8_t>(p_.front());
      p_.remove_prefix(1);
      v |= uint64_t{b & 0x7fu} << (7 * i);
      if (!(b & 0x80)) return v;
    }
    throw std::runtime_error("varint longer than 10 bytes");
  }
  uint64_t fixed(int bytes) {
    if (p_.size() < static_cast<size_t>(bytes)) throw std::runtime_error("truncated fixed");
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= uint64_t{static_cast<uint8_t>(p_[i])} << (8 * i);
    p_.remove_prefix(static_cast<size_t>(bytes));
    return v;
  }
  std::string_view bytes() {
    const uint64_t n = varint();
    if (n > p_.size()) throw std::runtime_error("truncated length-delimited field");
    const std::string_view out = p_.substr(0, n);
    p_.remove_prefix(n);
    return out;
  }

 private:
  std::string_view p_;
};

[[noreturn]] void unexpected(const char* message, uint64_t key) {
  throw std::runtime_error(std::string("unexpected field in ") + message + ": key " +
                           std::to_string(key));
}

ScalarValue decode_value(std::string_view bytes) {
  ScalarValue out;
  bool has_tag = false, has_value = false;
  Wire w(bytes);
  while (!w.done()) {
    const uint64_t key = w.varint();
    if (key == ((1 << 3) | 2)) {
      out.tag = std::string(w.bytes());
      has_tag = true;
    } else if (key == ((2 << 3) | 5)) {
      out.value = std::bit_cast<float>(static_cast<uint32_t>(w.fixed(4)));
      has_value = true;
    } else {
      unexpected("Summary.Value", key);
    }
  }
  if (!has_tag || !has_value) throw std::runtime_error("Summary.Value lacks tag or simple_value");
  return out;
}

DecodedEvent decode_event(std::string_view bytes) {
  DecodedEvent out;
  Wire w(bytes);
  while (!w.done()) {
    const uint64_t key = w.varint();
    if (key == ((1 << 3) | 1)) {
      out.wall_time = std::bit_cast<double>(w.fixed(8));
    } else if (key == ((2 << 3) | 0)) {
      out.step = static_cast<int64_t>(w.varint());
    } else if (key == ((3 << 3) | 2)) {
      out.file_version = std::string(w.bytes());
    } else if (key == ((5 << 3) | 2)) {
      out.has_summary = true;
      Wire summary(w.bytes());
      while (!summary.done()) {
        const uint64_t skey = summary.varint();
        if (skey != ((1 << 3) | 2)) unexpected("Summary", skey);
        out.values.push_back(decode_value(summary.bytes()));
      }
    } else {
      unexpected("Event", key);
    }
  }
  return out;
}

// Every record of the file, raw, through crest's TFRecord reader (both CRCs checked).
std::vector<std::string> read_records(const std::string& path) {
  TfRecordReader reader(path, TfRecordCompression::none);
  std::vector<std::string> out;
  std::vector<std::byte> record;
  while (reader.next(record))
    out.emplace_back(reinterpret_cast<const char*>(record.data()), record.size());
  return out;
}

std::vector<DecodedEvent> read_events(const std::string& path) {
  std::vector<DecodedEvent> out;
  for (const auto& r : read_records(path)) out.push_back(decode_event(r));
  return out;
}

std::string hex_of(std::string_view bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (const char c : bytes) {
    out.push_back(digits[static_cast<uint8_t>(c) >> 4]);
    out.push_back(digits[static_cast<uint8_t>(c) & 0xf]);
  }
  return out;
}

void expect_file_version_record(const DecodedEvent& e) {
  ASSERT_TRUE(e.file_version.has_value());
  EXPECT_EQ(*e.file_version, "brain.Event:2");
  ASSERT_TRUE(e.wall_time.has_value());
  EXPECT_FALSE(e.step.has_value());
  EXPECT_FALSE(e.has_summary);
}

void expect_scalar(const DecodedEvent& e, const std::string& tag, int64_t step, float value,
                   double wall_time) {
  EXPECT_FALSE(e.file_version.has_value());
  ASSERT_TRUE(e.step.has_value());
  EXPECT_EQ(*e.step, step);
  ASSERT_TRUE(e.wall_time.has_value());
  EXPECT_EQ(*e.wall_time, wall_time);
  ASSERT_EQ(e.values.size(), 1u);
  EXPECT_EQ(e.values[0].tag, tag);
  // Bit-exact: the value is the double rounded to float, NaN included.
  EXPECT_EQ(std::bit_cast<uint32_t>(e.values[0].value), std::bit_cast<uint32_t>(value))
      << tag << " at step " << step << ": " << e.values[0].value << " vs " << value;
}

std::string host_name() {
  char buf[HOST_NAME_MAX + 1] = {};
  if (::gethostname(buf, sizeof buf) != 0 || buf[0] == '\0') return "localhost";
  buf[HOST_NAME_MAX] = '\0';
  return buf;
}

TEST(TensorBoardWriter, NamesFileLikeTensorFlowAndWritesFileVersionFirst) {
  ScratchDir dir;
  const std::string logdir = dir.file("runs/a/b");  // parents are created
  const double before = TensorBoardWriter::now();
  TensorBoardWriter w(logdir);
  const double after = TensorBoardWriter::now();

  const std::filesystem::path p(w.path());
  EXPECT_EQ(p.parent_path(), std::filesystem::path(logdir));
  const std::regex name(R"(events\.out\.tfevents\.(\d{10})\.(.+)\.(\d+)\.(\d+))");
  std::smatch m;
  const std::string file = p.filename().string();
  ASSERT_TRUE(std::regex_match(file, m, name)) << file;
  const long long seconds = std::stoll(m[1].str());
  EXPECT_GE(seconds, static_cast<long long>(before));
  EXPECT_LE(seconds, static_cast<long long>(after));
  EXPECT_EQ(m[2].str(), host_name());
  EXPECT_EQ(m[3].str(), std::to_string(::getpid()));

  // Readable at once, with nothing flushed by the caller: the file_version record is there.
  const auto events = read_events(w.path());
  ASSERT_EQ(events.size(), 1u);
  expect_file_version_record(events[0]);
  EXPECT_GE(*events[0].wall_time, before);
  EXPECT_LE(*events[0].wall_time, after);
}

TEST(TensorBoardWriter, EncodesEventsExactlyAsProtobufDoes) {
  // Expected bytes from the Python protobuf library (tensorboard.compat.proto.event_pb2):
  // Event(wall_time=1.5, step=1, summary=Summary(value=[Value(tag='a', simple_value=1.0)])),
  // and the same with step=-1 (a ten-byte varint).
  ScratchDir dir;
  TensorBoardWriter w(dir.file("logs"));
  w.scalar("a", 1, 1.0, 1.5);
  w.scalar("a", -1, 1.0, 1.5);
  w.flush();
  const auto records = read_records(w.path());
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(hex_of(records[1]), "09000000000000f83f10012a0a0a080a0161150000803f");
  EXPECT_EQ(hex_of(records[2]), "09000000000000f83f10ffffffffffffffffff012a0a0a080a0161150000803f");
  // The file_version record: Event(wall_time=..., file_version='brain.Event:2').
  EXPECT_EQ(hex_of(records[0]).substr(18), "1a0d627261696e2e4576656e743a32");
}

TEST(TensorBoardWriter, FramesRecordsAsTfRecord) {
  // The whole frame of the scalar record, independent of crest's reader and CRC code: length
  // 23, masked CRC32C of the length, the Event above, masked CRC32C of it, as TensorBoard's own
  // framing computes them (tensorboard.compat.tensorflow_stub.pywrap_tensorflow.masked_crc32c).
  ScratchDir dir;
  TensorBoardWriter w(dir.file("logs"));
  w.scalar("a", 1, 1.0, 1.5);
  w.close();
  const auto bytes = test::read_file_bytes(w.path());
  const auto first =
      static_cast<std::ptrdiff_t>(read_records(w.path()).at(0).size() + kTfRecordFramingBytes);
  const std::vector<std::byte> frame(
      bytes.begin() + std::min<std::ptrdiff_t>(first, std::ssize(bytes)), bytes.end());
  EXPECT_EQ(frame, from_hex("1700000000000000e7cef81e09000000000000f83f10012a0a0a080a01611500"
                            "00803fa14405e1"));
}

TEST(TensorBoardWriter, WritesScalarsReadableWhileOpen) {
  ScratchDir dir;
  TensorBoardWriter w(dir.file("logs"));
  w.scalar("loss/train", 0, 2.5, 100.0);
  w.scalar("loss/train", 1, 0.1, 101.25);  // not a float: rounded
  w.scalar("lr", 1, 1e-3, 101.25);
  w.scalar("big/step", int64_t{1} << 40, -7.0, 102.0);
  w.scalar("neg", std::numeric_limits<int64_t>::min(), 1e40, 103.0);  // beyond float: inf
  w.scalar("tiny", 0, 1e-50, 104.0);                                  // below float: 0
  w.flush();

  const auto events = read_events(w.path());  // the writer is still open
  ASSERT_EQ(events.size(), 7u);
  expect_file_version_record(events[0]);
  expect_scalar(events[1], "loss/train", 0, 2.5f, 100.0);
  expect_scalar(events[2], "loss/train", 1, 0.1f, 101.25);
  expect_scalar(events[3], "lr", 1, 1e-3f, 101.25);
  expect_scalar(events[4], "big/step", int64_t{1} << 40, -7.0f, 102.0);
  expect_scalar(events[5], "neg", std::numeric_limits<int64_t>::min(),
                std::numeric_limits<float>::infinity(), 103.0);
  expect_scalar(events[6], "tiny", 0, 0.0f, 104.0);

  // More events after a flush append to the same file.
  w.scalar("loss/train", 2, 0.5, 105.0);
  w.flush();
  const auto more = read_events(w.path());
  ASSERT_EQ(more.size(), 8u);
  expect_scalar(more[7], "loss/train", 2, 0.5f, 105.0);
}

TEST(TensorBoardWriter, NanAndInfinitiesPassThroughAsFloats) {
  ScratchDir dir;
  std::string path;
  {
    TensorBoardWriter w(dir.file("logs"));
    path = w.path();
    w.scalar("x", 1, std::numeric_limits<double>::quiet_NaN(), 1.0);
    w.scalar("x", 2, std::numeric_limits<double>::infinity(), 2.0);
    w.scalar("x", 3, -std::numeric_limits<double>::infinity(), 3.0);
    w.scalar("x", 4, -0.0, 4.0);
  }  // the destructor flushes
  const auto events = read_events(path);
  ASSERT_EQ(events.size(), 5u);
  ASSERT_EQ(events[1].values.size(), 1u);
  EXPECT_TRUE(std::isnan(events[1].values[0].value));
  expect_scalar(events[2], "x", 2, std::numeric_limits<float>::infinity(), 2.0);
  expect_scalar(events[3], "x", 3, -std::numeric_limits<float>::infinity(), 3.0);
  expect_scalar(events[4], "x", 4, -0.0f, 4.0);
}

TEST(TensorBoardWriter, DefaultWallTimeIsNow) {
  ScratchDir dir;
  TensorBoardWriter w(dir.file("logs"));
  const double before = TensorBoardWriter::now();
  w.scalar("x", 7, 1.0);
  const double after = TensorBoardWriter::now();
  w.flush();
  const auto events = read_events(w.path());
  ASSERT_EQ(events.size(), 2u);
  ASSERT_TRUE(events[1].wall_time.has_value());
  EXPECT_GE(*events[1].wall_time, before);
  EXPECT_LE(*events[1].wall_time, after);
  EXPECT_GT(before, 1.6e9);  // seconds since 1970, not milliseconds or a steady clock
  EXPECT_LT(before, 1.0e10);
}

TEST(TensorBoardWriter, EventsWaitForFlushUntilTheQueueIsLarge) {
  ScratchDir dir;
  TensorBoardWriter w(dir.file("logs"));
  const auto size_after_version = std::filesystem::file_size(w.path());
  w.scalar("x", 1, 1.0, 1.0);
  EXPECT_EQ(std::filesystem::file_size(w.path()), size_after_version);
  // Past kAutoFlushBytes of queued events scalar() writes them itself.
  int64_t step = 2;
  while (std::filesystem::file_size(w.path()) == size_after_version && step < 1'000'000)
    w.scalar("x", step++, 1.0, 1.0);
  EXPECT_GT(std::filesystem::file_size(w.path()), TensorBoardWriter::kAutoFlushBytes);
  EXPECT_EQ(read_events(w.path()).size(), static_cast<size_t>(step));  // whole records only
}

TEST(TensorBoardWriter, WritersInOneDirectoryGetTheirOwnFiles) {
  ScratchDir dir;
  TensorBoardWriter a(dir.file("logs"));
  TensorBoardWriter b(dir.file("logs"));
  EXPECT_NE(a.path(), b.path());
  a.scalar("x", 1, 1.0, 1.0);
  b.scalar("y", 1, 2.0, 1.0);
  a.flush();
  b.flush();
  ASSERT_EQ(read_events(a.path()).size(), 2u);
  ASSERT_EQ(read_events(b.path()).size(), 2u);
  EXPECT_EQ(read_events(a.path())[1].values.at(0).tag, "x");
  EXPECT_EQ(read_events(b.path())[1].values.at(0).tag, "y");
}

TEST(TensorBoardWriter, MovedWriterKeepsWritingTheSameFile) {
  ScratchDir dir;
  TensorBoardWriter a(dir.file("logs"));
  a.scalar("x", 1, 1.0, 1.0);  // queued, moves along
  TensorBoardWriter b(std::move(a));
  b.scalar("x", 2, 2.0, 2.0);
  TensorBoardWriter c(dir.file("other"));
  const std::string c_path = c.path();
  c.scalar("y", 1, 3.0, 1.0);
  c = std::move(b);  // c's own file is flushed and closed first
  c.flush();
  const auto events = read_events(c.path());
  ASSERT_EQ(events.size(), 3u);
  expect_scalar(events[1], "x", 1, 1.0f, 1.0);
  expect_scalar(events[2], "x", 2, 2.0f, 2.0);
  const auto other = read_events(c_path);
  ASSERT_EQ(other.size(), 2u);
  expect_scalar(other[1], "y", 1, 3.0f, 1.0);
}

TEST(TensorBoardWriter, UseAfterCloseIsAnInternalError) {
  ScratchDir dir;
  TensorBoardWriter w(dir.file("logs"));
  w.close();
  w.close();  // idempotent
  try {
    w.scalar("x", 1, 1.0);
    ADD_FAILURE() << "scalar() after close() must throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::runtime) << e.what();
  }
}

TEST(TensorBoardWriter, UnwritableLogdirThrowsNamingIt) {
  ScratchDir dir;
  // A regular file where a directory should be: fails for root as well, unlike permissions.
  test::write_file_bytes(dir.file("plain"), test::bytes_of("not a directory"));
  const std::string under_file = dir.file("plain") + "/logs";
  expect_input_error([&] { TensorBoardWriter w(under_file); }, {under_file, "TensorBoard"});
  const std::string is_file = dir.file("plain");
  expect_input_error([&] { TensorBoardWriter w(is_file); }, {is_file, "TensorBoard log directory"});
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"plain"});
}

TEST(TensorBoardWriter, UnwritableDirectoryThrowsNamingTheFile) {
  if (::geteuid() == 0) GTEST_SKIP() << "root writes into read-only directories";
  ScratchDir dir;
  const std::string logdir = dir.file("ro");
  std::filesystem::create_directory(logdir);
  std::filesystem::permissions(
      logdir, std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
  expect_input_error([&] { TensorBoardWriter w(logdir); },
                     {logdir + "/events.out.tfevents.", "cannot create"});
  std::filesystem::permissions(logdir, std::filesystem::perms::owner_all);
}

TEST(TensorBoardWriter, WriteFailureThrowsNamingTheFileAndLeavesWholeRecords) {
  ScratchDir dir;
  TensorBoardWriter w(dir.file("logs"));
  w.scalar("x", 1, 1.0, 1.0);
  w.flush();
  const auto good_size = std::filesystem::file_size(w.path());
  {
    FileSizeLimit limit(good_size + 100);  // room for two more events and a half
    ASSERT_TRUE(limit.ok());
    for (int64_t step = 2; step < 12; ++step) w.scalar("x", step, 1.0, 1.0);
    expect_input_error([&] { w.flush(); }, {w.path(), "cannot write"});
  }
  // The partial tail was cut off: the file still holds exactly the events flushed before.
  EXPECT_EQ(std::filesystem::file_size(w.path()), good_size);
  EXPECT_EQ(read_events(w.path()).size(), 2u);
  // The writer stays failed, and says so, rather than writing after a gap.
  expect_input_error([&] { w.scalar("x", 20, 1.0, 1.0); }, {w.path(), "earlier write"});
  expect_input_error([&] { w.flush(); }, {w.path(), "earlier write"});
  w.close();  // the failure was reported already
}

TEST(TensorBoardWriter, FailureOnTheFirstRecordLeavesNoFile) {
  ScratchDir dir;
  const std::string logdir = dir.file("logs");
  std::filesystem::create_directory(logdir);
  {
    FileSizeLimit limit(10);  // not even the first record's 12-byte header fits
    ASSERT_TRUE(limit.ok());
    expect_input_error([&] { TensorBoardWriter w(logdir); },
                       {logdir + "/events.out.tfevents.", "cannot write"});
  }
  EXPECT_TRUE(std::filesystem::is_empty(logdir));
}

// The scalars tests/interop/tensorboard_interop.py expects, in order. Steps never go down:
// TensorBoard discards events "orphaned" by a step that goes back (a restarted run).
struct InteropScalar {
  const char* tag;
  int64_t step;
  double value;
};

std::vector<InteropScalar> interop_scalars() {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  return {
      {"loss/train", 0, 2.5},  {"lr", 0, 0.001},  {"loss/train", 1, 0.1},          {"lr", 1, 0.002},
      {"loss/train", 2, 1e-8}, {"lr", 2, 0.0005}, {"loss/valid", 2, 0.75},         {"odd", 10, nan},
      {"odd", 11, inf},        {"odd", 12, -inf}, {"big", int64_t{1} << 40, -3.25}};
}

// Writes the interop file into $CREST_TB_INTEROP_DIR; wall_time of each event is
// 1700000000 + step + 0.5 (except `big`: 1700000000.5).
TEST(TensorBoardWriter, WritesInteropFile) {
  const char* dir = std::getenv("CREST_TB_INTEROP_DIR");
  if (dir == nullptr || *dir == '\0')
    GTEST_SKIP()
        << "CREST_TB_INTEROP_DIR is not set (tests/interop/tensorboard_interop.py sets it)";
  TensorBoardWriter w(dir);
  for (const auto& s : interop_scalars()) {
    const double wall = 1700000000.5 + (s.step < 1000 ? static_cast<double>(s.step) : 0.0);
    w.scalar(s.tag, s.step, s.value, wall);
  }
  w.close();
  EXPECT_EQ(read_events(w.path()).size(), interop_scalars().size() + 1);
}

}  // namespace
}  // namespace crest
