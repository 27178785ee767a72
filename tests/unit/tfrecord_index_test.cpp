// Random access to TFRecord records (index_tfrecord_file, read_tfrecord_at): the offsets of
// records of every size, each record read alone with both CRCs checked, and every defect named
// with the file and the record: a cut file, a corrupt header, corrupt data, a GZIP file, a file
// that changed after it was indexed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "crest/data/formats/tfrecord.hpp"
#include "unit/data_formats_test_util.hpp"

namespace crest {
namespace {

using test::bytes_of;
using test::expect_input_error;
using test::read_file_bytes;
using test::write_file_bytes;

struct Shard {
  // One file per test and process: ctest runs the cases of this suite in parallel.
  std::string path = (std::filesystem::temp_directory_path() /
                      ("crest_tfrecord_index_" + std::to_string(::getpid()) + "_" +
                       ::testing::UnitTest::GetInstance()->current_test_info()->name()))
                         .string();
  std::vector<std::vector<std::byte>> records = {
      bytes_of("first"), {}, bytes_of("third record"), std::vector<std::byte>(70000, std::byte{7})};
  explicit Shard(TfRecordCompression c = TfRecordCompression::none) {
    TfRecordWriter w(path, c);
    for (const auto& r : records) w.write(r);
    w.close();
  }
  ~Shard() { std::filesystem::remove(path); }
};

TEST(TfRecordIndex, FindsEveryRecordAndReadsEachAlone) {
  const Shard s;
  const std::vector<TfRecordSpan> spans = index_tfrecord_file(s.path);
  ASSERT_EQ(spans.size(), s.records.size());
  uint64_t offset = 0;
  for (size_t k = 0; k < spans.size(); ++k) {
    EXPECT_EQ(spans[k].offset, offset);
    EXPECT_EQ(spans[k].length, s.records[k].size());
    offset += s.records[k].size() + kTfRecordFramingBytes;
  }
  std::vector<std::byte> data(3, std::byte{1});  // a reused buffer's old contents do not leak
  for (size_t k : {3u, 0u, 2u, 1u}) {
    read_tfrecord_at(s.path, spans[k], data);
    EXPECT_EQ(data, s.records[k]) << "record " << k;
  }
}

TEST(TfRecordIndex, NamesEveryDefectWithTheFileAndRecord) {
  const Shard s;
  const std::vector<std::byte> good = read_file_bytes(s.path);
  const std::vector<TfRecordSpan> spans = index_tfrecord_file(s.path);
  // Cut inside record 3's data, and inside record 2's header.
  write_file_bytes(s.path, {good.begin(), good.end() - 100});
  expect_input_error([&] { index_tfrecord_file(s.path); },
                     {s.path, "record 3 at byte " + std::to_string(spans[3].offset), "truncated"});
  write_file_bytes(s.path, {good.begin(), good.begin() + static_cast<long>(spans[2].offset) + 5});
  expect_input_error([&] { index_tfrecord_file(s.path); },
                     {"record 2", "ends inside the record's header"});
  // A flipped length byte: the header's CRC.
  std::vector<std::byte> bad = good;
  bad[spans[1].offset] ^= std::byte{1};
  write_file_bytes(s.path, bad);
  expect_input_error([&] { index_tfrecord_file(s.path); }, {"record 1", "length's CRC"});
  // A flipped data byte: found by the read of that record, not by the index.
  bad = good;
  bad[spans[2].offset + 12 + 3] ^= std::byte{1};
  write_file_bytes(s.path, bad);
  EXPECT_EQ(index_tfrecord_file(s.path).size(), 4u);
  std::vector<std::byte> data;
  expect_input_error([&] { read_tfrecord_at(s.path, spans[2], data); },
                     {s.path, "byte " + std::to_string(spans[2].offset), "data's CRC"});
  read_tfrecord_at(s.path, spans[3], data);  // the others still read
  // The file shrank after indexing.
  write_file_bytes(s.path, {good.begin(), good.begin() + 40});
  expect_input_error([&] { read_tfrecord_at(s.path, spans[3], data); },
                     {"past the end of the file", "changed after it was indexed"});
}

TEST(TfRecordIndex, RefusesGzipByName) {
  const Shard s(TfRecordCompression::gzip);
  expect_input_error([&] { index_tfrecord_file(s.path); }, {s.path, "GZIP-compressed"});
}

}  // namespace
}  // namespace crest
