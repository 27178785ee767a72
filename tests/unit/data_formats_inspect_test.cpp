// `crest inspect`: format detection by content and the description of each format.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "crest/data/formats/crc32c.hpp"
#include "crest/data/formats/example.hpp"
#include "crest/data/formats/hdf5.hpp"
#include "crest/data/formats/inspect.hpp"
#include "crest/data/formats/npy.hpp"
#include "crest/data/formats/tfrecord.hpp"
#include "unit/data_formats_test_util.hpp"

namespace crest {
namespace {

using test::bytes_of;
using test::expect_input_error;
using test::fixture_path;

void expect_contains(const std::string& text, std::initializer_list<std::string> pieces) {
  for (const auto& p : pieces)
    EXPECT_NE(text.find(p), std::string::npos) << text << "\n  lacks: " << p;
}

class InspectTest : public ::testing::Test {
 protected:
  test::ScratchDir dir_;
};

TEST_F(InspectTest, DescribesTfRecordFilesAndTheirFirstExample) {
  const std::string plain = fixture_path("example_y.tfrecord");
  EXPECT_EQ(detect_data_file_format(plain), DataFileFormat::tfrecord);
  expect_contains(
      inspect_file(plain),
      {plain + ": TFRecord, uncompressed, 33 bytes on disk", "records: 1 (17 bytes of record data",
       "record 0: 17 bytes, tf.train.Example with 1 feature", "  y  float_list, 1 value: [1]"});

  // A CosmoFlow-shaped sample in miniature, gzip-compressed.
  std::vector<int16_t> volume(512, 3);
  const float y[4] = {0.5f, -0.25f, 0.125f, 1.0f};
  const int64_t shape[4] = {8, 8, 8, 1};
  const auto record = ExampleBuilder()
                          .add_bytes("x", std::as_bytes(std::span(volume)))
                          .add_floats("y", y)
                          .add_int64s("shape", shape)
                          .encode();
  const std::string gz = dir_.file("sample.tfrecord");
  TfRecordWriter w(gz, TfRecordCompression::gzip);
  w.write(record);
  w.write(record);
  w.close();
  EXPECT_EQ(detect_data_file_format(gz), DataFileFormat::tfrecord_gzip);
  expect_contains(
      inspect_file(gz),
      {"TFRecord, GZIP-compressed", "records: 2", "tf.train.Example with 3 features",
       "  shape  int64_list, 4 values: [8, 8, 8, 1]", "  x      bytes_list, 1 value, 1,024 bytes",
       "  y      float_list, 4 values: [0.5, -0.25, 0.125, 1]"});

  const std::string gz3 = fixture_path("three_records.tfrecord.gz");
  expect_contains(inspect_file(gz3), {"records: 3"});

  const std::string other = dir_.file("other.tfrecord");
  TfRecordWriter o(other);
  o.write(bytes_of("\x08\x01 not protobuf"));
  o.close();
  expect_contains(inspect_file(other), {"records: 1", "not a tf.train.Example"});
}

TEST_F(InspectTest, PlainTfRecordsThatLookLikeOtherFormatsAreStillTfRecords) {
  // First record lengths whose header starts like gzip (1f 8b) or whose length CRC starts with
  // '{' (as a safetensors header would).
  size_t brace_length = 1;
  for (;; ++brace_length) {
    unsigned char len[8] = {};
    for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(brace_length >> (8 * i));
    if ((crc32c_mask(crc32c(len, 8)) & 0xff) == '{') break;
  }
  for (size_t length : {size_t{0x8b1f}, brace_length}) {
    const std::string path = dir_.file("r" + std::to_string(length));
    TfRecordWriter w(path);
    w.write(std::vector<std::byte>(length, std::byte{7}));
    w.close();
    EXPECT_EQ(detect_data_file_format(path), DataFileFormat::tfrecord) << length;
    expect_contains(inspect_file(path), {"TFRecord, uncompressed", "records: 1"});
  }
}

TEST_F(InspectTest, DescribesHdf5) {
  DeepcamStats s;
  s.count = 7;
  s.minval = s.maxval = s.mean = s.sqmean = {1, 2};
  const std::string path = dir_.file("stats.h5");
  write_deepcam_stats(path, s);
  EXPECT_EQ(detect_data_file_format(path), DataFileFormat::hdf5);
  expect_contains(inspect_file(path),
                  {path + ": HDF5", "/climate/ ", "group", "/climate/count   int64 scalar",
                   "/climate/maxval  float32 [2]"});
}

TEST_F(InspectTest, DescribesNpy) {
  const std::string path = fixture_path("i4_big_endian.npy");
  EXPECT_EQ(detect_data_file_format(path), DataFileFormat::npy);
  expect_contains(inspect_file(path),
                  {path + ": NumPy .npy, format 1.0", "dtype: int32 ('>i4', big-endian)",
                   "shape: [2, 2], 4 elements, 16 bytes, C order"});
  expect_contains(inspect_file(fixture_path("f8_scalar.npy")),
                  {"shape: scalar, 1 element, 8 bytes"});
  expect_contains(inspect_file(fixture_path("i2_fortran.npy")), {"Fortran order"});
}

TEST_F(InspectTest, DescribesSafetensors) {
  const std::string path =
      std::string(CREST_SOURCE_DIR) + "/tests/fixtures/numpy_written.safetensors";
  EXPECT_EQ(detect_data_file_format(path), DataFileFormat::safetensors);
  expect_contains(inspect_file(path), {path + ": safetensors, 11 tensors", "conv.weight",
                                       "F32 [2, 3, 4], 96 bytes", "metadata:", "format = np"});
}

TEST_F(InspectTest, UnknownEmptyAndDamagedFilesAreErrorsNamingTheFile) {
  const std::string text = dir_.file("notes.txt");
  test::write_file_bytes(text, bytes_of("just some text, nothing else"));
  expect_input_error([&] { (void)inspect_file(text); },
                     {text + ": unknown format", "first bytes: 6a 75 73 74"});
  const std::string empty = dir_.file("empty");
  test::write_file_bytes(empty, {});
  expect_input_error([&] { (void)inspect_file(empty); }, {empty + ": empty file"});
  expect_input_error([&] { (void)inspect_file(dir_.file("absent")); },
                     {dir_.file("absent"), "cannot open"});

  // A TFRecord with a damaged second record: recognised, then the reader's error.
  const std::string bad = dir_.file("bad.tfrecord");
  TfRecordWriter w(bad);
  w.write(bytes_of("one"));
  w.write(bytes_of("two"));
  w.close();
  auto bytes = test::read_file_bytes(bad);
  bytes.back() ^= std::byte{1};
  test::write_file_bytes(bad, bytes);
  expect_input_error([&] { (void)inspect_file(bad); }, {bad + ": record 1", "data CRC mismatch"});
}

}  // namespace
}  // namespace crest
