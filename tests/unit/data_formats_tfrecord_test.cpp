// TFRecord reader and writer: SPEC.md §3 framing byte for byte, round trips (plain and GZIP),
// interop with Python's gzip module, and every kind of corruption giving a precise error.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "crest/data/formats/crc32c.hpp"
#include "crest/data/formats/example.hpp"
#include "crest/data/formats/tfrecord.hpp"
#include "unit/data_formats_test_util.hpp"

namespace crest {
namespace {

using test::bytes_of;
using test::expect_input_error;
using test::fixture_path;
using test::from_hex;
using test::read_file_bytes;
using test::write_file_bytes;

std::vector<std::byte> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<std::byte> out(n);
  for (auto& b : out) b = static_cast<std::byte>(gen() & 0xff);
  return out;
}

// Records that cover the edge cases: empty, tiny, larger than the 1 MiB read chunk.
std::vector<std::vector<std::byte>> sample_records() {
  return {bytes_of("first"),
          {},
          random_bytes(1536 * 1024 + 7, 1),
          bytes_of("x"),
          random_bytes(70000, 2)};
}

std::vector<std::vector<std::byte>> read_all(TfRecordReader& reader) {
  std::vector<std::vector<std::byte>> out;
  std::vector<std::byte> record;
  while (reader.next(record)) out.push_back(record);
  EXPECT_FALSE(reader.next(record)) << "next() after the end must keep returning false";
  return out;
}

void write_records(const std::string& path, TfRecordCompression c,
                   const std::vector<std::vector<std::byte>>& records) {
  TfRecordWriter w(path, c);
  for (const auto& r : records) w.write(r);
  w.close();
  EXPECT_EQ(w.records_written(), records.size());
}

class TfrecordTest : public ::testing::Test {
 protected:
  test::ScratchDir dir_;
};

TEST_F(TfrecordTest, WritesTheSpecGoldenFramingByteForByte) {
  const auto example = from_hex("0a0f0a0d0a0179120812060a040000803f");
  const auto golden = from_hex(
      "1100000000000000"
      "9d6db52e"
      "0a0f0a0d0a0179120812060a040000803f"
      "9fc43e39");
  const std::string path = dir_.file("y.tfrecord");
  write_records(path, TfRecordCompression::none, {example});
  EXPECT_EQ(read_file_bytes(path), golden);
  EXPECT_EQ(read_file_bytes(fixture_path("example_y.tfrecord")), golden);

  TfRecordReader reader(fixture_path("example_y.tfrecord"));
  EXPECT_EQ(reader.compression(), TfRecordCompression::none);
  const auto records = read_all(reader);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0], example);
  EXPECT_EQ(reader.offset(), golden.size());
  EXPECT_EQ(read_single_record(fixture_path("example_y.tfrecord")), example);
}

TEST_F(TfrecordTest, RoundTripsPlainAndGzipFromFileAndMemory) {
  const auto records = sample_records();
  for (auto c : {TfRecordCompression::none, TfRecordCompression::gzip}) {
    SCOPED_TRACE(tfrecord_compression_name(c));
    const std::string path = dir_.file(std::string("r.") + tfrecord_compression_name(c));
    write_records(path, c, records);
    EXPECT_EQ(dir_.listing().size(), c == TfRecordCompression::none ? 1u : 2u)
        << "a temporary file was left behind";

    for (auto mode : {TfRecordCompression::detect, c}) {
      TfRecordReader reader(path, mode);
      EXPECT_EQ(reader.compression(), c);
      EXPECT_EQ(read_all(reader), records);
      EXPECT_EQ(reader.records_read(), records.size());
    }
    const auto stored = read_file_bytes(path);
    TfRecordReader in_memory = TfRecordReader::from_memory(stored, "staged:" + path);
    EXPECT_EQ(in_memory.compression(), c);
    EXPECT_EQ(in_memory.name(), "staged:" + path);
    EXPECT_EQ(read_all(in_memory), records);
  }
}

TEST_F(TfrecordTest, GzipLevelsAllRoundTrip) {
  const auto records = sample_records();
  for (int level : {-1, 0, 1, 9}) {
    const std::string path = dir_.file("level" + std::to_string(level));
    TfRecordWriter w(path, TfRecordCompression::gzip, level);
    for (const auto& r : records) w.write(r);
    w.close();
    TfRecordReader reader(path);
    EXPECT_EQ(read_all(reader), records) << level;
  }
}

TEST_F(TfrecordTest, ReadsGzipWrittenByPython) {
  // make_format_fixtures.py: framed by an independent CRC-32C, compressed by Python's gzip.
  TfRecordReader reader(fixture_path("three_records.tfrecord.gz"));
  EXPECT_EQ(reader.compression(), TfRecordCompression::gzip);
  const auto records = read_all(reader);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0], from_hex("0a0f0a0d0a0179120812060a040000803f"));
  EXPECT_TRUE(records[1].empty());
  std::string text;
  for (int i = 0; i < 1000; ++i) text += "crest";
  EXPECT_EQ(records[2], bytes_of(text));

  // Concatenated gzip members (cat a.gz b.gz) read as one stream, as gzip(1) and TF do.
  TfRecordReader two(fixture_path("two_members.tfrecord.gz"));
  const auto both = read_all(two);
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(both[0], bytes_of("first"));
  EXPECT_EQ(both[1], bytes_of("second"));
}

TEST_F(TfrecordTest, PythonGzipReadsCrestOutput) {
  if (!std::filesystem::exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3";
  const auto records = sample_records();
  write_records(dir_.file("plain"), TfRecordCompression::none, records);
  write_records(dir_.file("z.gz"), TfRecordCompression::gzip, records);
  const std::string cmd =
      "/usr/bin/python3 -c \"import gzip, sys; "
      "open(sys.argv[2], 'wb').write(gzip.open(sys.argv[1]).read())\" '" +
      dir_.file("z.gz") + "' '" + dir_.file("unzipped") + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  EXPECT_EQ(read_file_bytes(dir_.file("unzipped")), read_file_bytes(dir_.file("plain")));
}

TEST_F(TfrecordTest, ReadSingleRecordCountsRecords) {
  const std::string one = dir_.file("one.gz");
  write_records(one, TfRecordCompression::gzip, {random_bytes(5000, 9)});
  EXPECT_EQ(read_single_record(one), random_bytes(5000, 9));
  std::vector<std::byte> reused;
  read_single_record(one, TfRecordCompression::gzip, reused);
  EXPECT_EQ(reused.size(), 5000u);

  write_records(dir_.file("none"), TfRecordCompression::none, {});
  expect_input_error([&] { read_single_record(dir_.file("none")); },
                     {dir_.file("none"), "holds no records, expected exactly 1"});
  write_records(dir_.file("three"), TfRecordCompression::gzip,
                {bytes_of("a"), bytes_of("b"), bytes_of("c")});
  expect_input_error([&] { read_single_record(dir_.file("three")); },
                     {dir_.file("three"), "holds 3 records, expected exactly 1"});
  expect_input_error([&] { read_single_record(dir_.file("missing")); },
                     {dir_.file("missing"), "cannot open"});
}

// Two records; every defect is placed in the second so the error must name record 1 and the
// byte offset where it starts (16 + 5 = 21).
class TfrecordCorruptionTest : public TfrecordTest {
 protected:
  void SetUp() override {
    write_records(good_, TfRecordCompression::none, {bytes_of("hello"), random_bytes(1000, 5)});
    bytes_ = read_file_bytes(good_);
  }
  void expect_error(const std::vector<std::byte>& bytes, const std::string& needle) {
    const std::string path = dir_.file("bad.tfrecord");
    write_file_bytes(path, bytes);
    expect_input_error(
        [&] {
          TfRecordReader reader(path);
          std::vector<std::byte> r;
          while (reader.next(r)) {
          }
        },
        {path + ": record 1 at byte offset 21: ", needle});
    // The same defect read from memory names the display name.
    expect_input_error(
        [&] {
          TfRecordReader reader = TfRecordReader::from_memory(bytes, "mem.tfrecord");
          std::vector<std::byte> r;
          while (reader.next(r)) {
          }
        },
        {"mem.tfrecord: record 1 at byte offset 21: ", needle});
  }
  std::string good_ = dir_.file("good.tfrecord");
  std::vector<std::byte> bytes_;
};

TEST_F(TfrecordCorruptionTest, FlippedDataByteIsADataCrcMismatch) {
  auto b = bytes_;
  b[21 + 12 + 500] ^= std::byte{0x01};
  expect_error(b, "data CRC mismatch (stored 0x");
}

TEST_F(TfrecordCorruptionTest, ReaderStaysFailedAfterAnError) {
  auto b = bytes_;
  b[21 + 12 + 500] ^= std::byte{0x01};
  TfRecordReader reader = TfRecordReader::from_memory(b, "mem");
  std::vector<std::byte> r;
  EXPECT_TRUE(reader.next(r));
  for (int i = 0; i < 2; ++i)
    expect_input_error([&] { (void)reader.next(r); }, {"mem: record 1", "data CRC mismatch"});
}

TEST_F(TfrecordCorruptionTest, FlippedLengthByteIsALengthCrcMismatch) {
  auto b = bytes_;
  b[21 + 1] ^= std::byte{0x04};
  expect_error(b, "length CRC mismatch");
}

TEST_F(TfrecordCorruptionTest, FlippedCrcBytesAreMismatches) {
  auto b = bytes_;
  b[21 + 9] ^= std::byte{0x80};  // the stored length CRC itself
  expect_error(b, "length CRC mismatch");
  b = bytes_;
  b.back() ^= std::byte{0x80};  // the stored data CRC
  expect_error(b, "data CRC mismatch");
}

TEST_F(TfrecordCorruptionTest, TruncationsNameWhereTheFileEnds) {
  auto cut = [&](size_t n) { return std::vector<std::byte>(bytes_.begin(), bytes_.begin() + n); };
  expect_error(cut(21 + 5), "truncated inside the 12-byte length header");
  expect_error(cut(21 + 12 + 300), "truncated inside the data");
  expect_error(cut(21 + 12 + 1000 + 2), "truncated inside the data CRC");
  expect_error(cut(21 + 12 + 1000), "truncated inside the data CRC");
}

TEST_F(TfrecordCorruptionTest, GzipTruncationsAreReportedWithRecordAndOffset) {
  // Same file compressed: truncation is found while inflating; the message names the record
  // being read and its offset in the uncompressed stream.
  const std::string gz = dir_.file("good.gz");
  write_records(gz, TfRecordCompression::gzip, {bytes_of("hello"), random_bytes(1000, 5)});
  const auto z = read_file_bytes(gz);
  const std::string path = dir_.file("cut.gz");
  write_file_bytes(path, std::vector<std::byte>(z.begin(), z.end() - 4));
  // Both records complete, the trailer cut: found when looking for a third record.
  expect_input_error([&] { (void)read_single_record(path); },
                     {path + ": record 2 at uncompressed byte offset 1037: gzip stream truncated"});
  write_file_bytes(path,
                   std::vector<std::byte>(z.begin(), z.begin() + static_cast<long>(z.size() / 2)));
  expect_input_error(
      [&] {
        TfRecordReader reader(path);
        std::vector<std::byte> r;
        while (reader.next(r)) {
        }
      },
      {path + ": record 1 at uncompressed byte offset 21: gzip stream truncated"});
}

TEST_F(TfrecordCorruptionTest, CorruptGzipStreams) {
  const std::string gz = dir_.file("good.gz");
  write_records(gz, TfRecordCompression::gzip, {bytes_of("hello"), random_bytes(1000, 5)});
  const auto z = read_file_bytes(gz);
  const std::string path = dir_.file("bad.gz");
  auto read_everything = [&] {
    TfRecordReader reader(path);
    std::vector<std::byte> r;
    while (reader.next(r)) {
    }
  };

  auto b = z;
  b[2] = std::byte{0x07};  // compression method: only 8 (deflate) exists
  write_file_bytes(path, b);
  expect_input_error(read_everything,
                     {path, "corrupt gzip stream in member 1", "unknown compression method"});

  b = z;
  b[b.size() - 6] ^= std::byte{0x01};  // the CRC-32 in the gzip trailer
  write_file_bytes(path, b);
  expect_input_error(read_everything, {path, "corrupt gzip stream", "incorrect data check"});

  b = z;
  b[b.size() - 2] ^= std::byte{0x01};  // ISIZE in the trailer
  write_file_bytes(path, b);
  expect_input_error(read_everything, {path, "corrupt gzip stream", "incorrect length check"});

  b = z;
  for (auto x : bytes_of("garbage")) b.push_back(x);
  write_file_bytes(path, b);
  expect_input_error(read_everything, {path, "7 bytes of trailing garbage after gzip member 1"});

  b = z;
  b.push_back(std::byte{0x1f});  // looks like the start of another member, then ends
  b.push_back(std::byte{0x00});
  write_file_bytes(path, b);
  expect_input_error(read_everything, {path, "gzip"});
}

TEST_F(TfrecordTest, AnyTruncationOrByteFlipIsAnErrorNeverACrash) {
  for (auto c : {TfRecordCompression::none, TfRecordCompression::gzip}) {
    const std::string good = dir_.file(std::string("f.") + tfrecord_compression_name(c));
    write_records(good, c, {bytes_of("abc"), {}, random_bytes(3000, 3)});
    const auto bytes = read_file_bytes(good);
    std::mt19937 gen(99);
    for (size_t n = 1; n < bytes.size(); n += 1 + n / 16) {
      auto cut = std::vector<std::byte>(bytes.begin(), bytes.begin() + static_cast<long>(n));
      TfRecordReader reader = TfRecordReader::from_memory(cut, "cut", c);
      std::vector<std::byte> r;
      size_t count = 0;
      try {
        while (reader.next(r)) ++count;
        // A cut exactly between records is a valid shorter file (plain only).
        EXPECT_EQ(c, TfRecordCompression::none) << "gzip cut at " << n << " read cleanly";
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::input);
      }
      EXPECT_LE(count, 3u);
    }
    for (int i = 0; i < 300; ++i) {
      auto flipped = bytes;
      const size_t at = gen() % flipped.size();
      flipped[at] ^= static_cast<std::byte>(1u << (gen() % 8));
      TfRecordReader reader = TfRecordReader::from_memory(flipped, "flipped", c);
      std::vector<std::byte> r;
      try {
        while (reader.next(r)) {
        }
        // Every plain byte is covered by a CRC. A gzip file has a few that are not (the
        // header's MTIME/XFL/OS fields, the padding bits after the last deflate block).
        EXPECT_EQ(c, TfRecordCompression::gzip) << "a flipped bit at " << at << " went unnoticed";
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::input);
      }
    }
  }
}

TEST_F(TfrecordTest, WriterIsAtomic) {
  const std::string path = dir_.file("out.tfrecord");
  write_records(path, TfRecordCompression::none, {bytes_of("old")});
  const auto old_bytes = read_file_bytes(path);
  {
    TfRecordWriter w(path, TfRecordCompression::gzip);
    w.write(bytes_of("new"));
    EXPECT_EQ(read_file_bytes(path), old_bytes) << "the target changed before close()";
    EXPECT_EQ(dir_.listing().size(), 2u);  // the target and the temporary file
    // destroyed without close(): abandoned
  }
  EXPECT_EQ(read_file_bytes(path), old_bytes);
  EXPECT_EQ(dir_.listing(), std::vector<std::string>{"out.tfrecord"});

  TfRecordWriter w(path, TfRecordCompression::none);
  w.write(bytes_of("new"));
  w.close();
  w.close();  // idempotent
  EXPECT_EQ(read_single_record(path), bytes_of("new"));
  EXPECT_EQ(dir_.listing(), std::vector<std::string>{"out.tfrecord"});
}

TEST_F(TfrecordTest, WriterRejectsBadOptions) {
  expect_input_error([&] { TfRecordWriter w(dir_.file("a"), TfRecordCompression::detect); },
                     {dir_.file("a"), "not detect"});
  expect_input_error([&] { TfRecordWriter w(dir_.file("a"), TfRecordCompression::gzip, 10); },
                     {dir_.file("a"), "gzip level 10"});
  expect_input_error([&] { TfRecordWriter w(dir_.file("no/such/dir/a")); },
                     {dir_.file("no/such/dir/a"), "cannot create a temporary file"});
  EXPECT_EQ(parse_tfrecord_compression("GZIP"), TfRecordCompression::gzip);
  EXPECT_EQ(parse_tfrecord_compression(""), TfRecordCompression::none);
  EXPECT_EQ(parse_tfrecord_compression("auto"), TfRecordCompression::detect);
  expect_input_error([] { (void)parse_tfrecord_compression("zlib"); }, {"'zlib'"});
}

TEST_F(TfrecordTest, DetectTellsAPlainFileWhoseLengthStartsLikeGzip) {
  // A first record of 0x8b1f bytes: the file starts with 1f 8b, like a gzip stream.
  const auto record = random_bytes(0x8b1f, 4);
  const std::string path = dir_.file("looks_gzip.tfrecord");
  write_records(path, TfRecordCompression::none, {record});
  const auto bytes = read_file_bytes(path);
  ASSERT_EQ(bytes[0], std::byte{0x1f});
  ASSERT_EQ(bytes[1], std::byte{0x8b});
  TfRecordReader reader(path);
  EXPECT_EQ(reader.compression(), TfRecordCompression::none);
  EXPECT_EQ(read_all(reader), std::vector<std::vector<std::byte>>{record});
}

TEST_F(TfrecordTest, EmptyFileHasNoRecords) {
  write_file_bytes(dir_.file("empty"), {});
  for (auto c :
       {TfRecordCompression::none, TfRecordCompression::gzip, TfRecordCompression::detect}) {
    TfRecordReader reader(dir_.file("empty"), c);
    std::vector<std::byte> r;
    EXPECT_FALSE(reader.next(r));
  }
}

// Throughput of the CosmoFlow path, for docs/data-formats.md. Not a regular test (timing on a
// shared machine is noise); run with
//   crest_tests --gtest_also_run_disabled_tests --gtest_filter='*MeasureCosmoflowRecordPath'
TEST_F(TfrecordTest, DISABLED_MeasureCosmoflowRecordPath) {
  // CosmoFlow-like volume: int16 counts, mostly small (gzip ratio close to the real files').
  std::mt19937 gen(5);
  std::poisson_distribution<int> counts(3.0);
  std::vector<int16_t> volume(128 * 128 * 128 * 4);
  for (auto& v : volume) v = static_cast<int16_t>(counts(gen));
  const float y[4] = {0.1f, -0.2f, 0.3f, 0.4f};
  ExampleBuilder builder;
  builder.add_bytes("x", std::as_bytes(std::span(volume))).add_floats("y", y);
  const auto record = builder.encode();

  using clock = std::chrono::steady_clock;
  auto seconds = [](clock::duration d) { return std::chrono::duration<double>(d).count(); };
  const int reps = 20;
  uint32_t sink = 0;
  auto t0 = clock::now();
  for (int i = 0; i < reps; ++i) sink ^= crc32c(record.data(), record.size());
  const double crc_hw = seconds(clock::now() - t0) / reps;
  t0 = clock::now();
  for (int i = 0; i < 3; ++i) sink ^= crc32c_portable(record.data(), record.size());
  const double crc_table = seconds(clock::now() - t0) / 3;

  const std::string gz = dir_.file("sample.tfrecord.gz"), plain = dir_.file("sample.tfrecord");
  t0 = clock::now();
  write_records(gz, TfRecordCompression::gzip, {record});
  const double deflate_s = seconds(clock::now() - t0);
  write_records(plain, TfRecordCompression::none, {record});

  std::vector<std::byte> out;
  read_single_record(gz, TfRecordCompression::detect, out);  // warm the page cache
  t0 = clock::now();
  for (int i = 0; i < 5; ++i) read_single_record(gz, TfRecordCompression::detect, out);
  const double gz_read = seconds(clock::now() - t0) / 5;
  t0 = clock::now();
  for (int i = 0; i < 5; ++i) read_single_record(plain, TfRecordCompression::detect, out);
  const double plain_read = seconds(clock::now() - t0) / 5;
  EXPECT_EQ(out, record);
  // Inflate from memory (no file system): zlib's inflate plus both CRC checks.
  const auto stored = read_file_bytes(gz);
  t0 = clock::now();
  for (int i = 0; i < 5; ++i) {
    TfRecordReader reader = TfRecordReader::from_memory(stored, "memory");
    while (reader.next(out)) {
    }
  }
  const double inflate_s = seconds(clock::now() - t0) / 5;

  const double mb = static_cast<double>(record.size()) / 1e6;
  std::printf(
      "record %zu bytes, gzip file %ju bytes (ratio %.2f)\n", record.size(),
      static_cast<uintmax_t>(std::filesystem::file_size(gz)),
      static_cast<double>(record.size()) / static_cast<double>(std::filesystem::file_size(gz)));
  std::printf("crc32c %s: %.2f GB/s; portable table: %.2f GB/s\n",
              crc32c_uses_hardware() ? "SSE4.2" : "table", mb / 1e3 / crc_hw, mb / 1e3 / crc_table);
  std::printf("gzip write (deflate level 6 + CRC + fsync): %.1f MB/s\n", mb / deflate_s);
  std::printf("inflate from memory (+ CRC32C + gzip CRC-32): %.1f ms = %.1f MB/s\n",
              inflate_s * 1e3, mb / inflate_s);
  std::printf("read_single_record gzip (inflate + CRC32C + gzip CRC): %.1f ms = %.1f MB/s\n",
              gz_read * 1e3, mb / gz_read);
  std::printf("read_single_record plain (page cache + CRC32C): %.1f ms = %.1f MB/s  [%u]\n",
              plain_read * 1e3, mb / plain_read, sink & 1);
}

}  // namespace
}  // namespace crest
