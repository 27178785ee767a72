// .npy: round trips, files written by numpy (tests/fixtures/formats, make_format_fixtures.py),
// byte-identical output to np.save, and rejection of every kind of damaged header.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "crest/data/formats/npy.hpp"
#include "unit/data_formats_test_util.hpp"

namespace crest {
namespace {

using test::bytes_of;
using test::expect_input_error;
using test::fixture_path;
using test::read_file_bytes;
using test::write_file_bytes;

template <typename T>
std::vector<T> values_of(const NpyArray& a) {
  EXPECT_EQ(a.data.size(), static_cast<size_t>(a.numel()) * sizeof(T));
  std::vector<T> out(a.data.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), a.data.data(), a.data.size());
  return out;
}

class NpyTest : public ::testing::Test {
 protected:
  test::ScratchDir dir_;
};

TEST_F(NpyTest, RoundTripsEveryCrestDtype) {
  const std::vector<float> f32{1.5f, -2.0f, 3.0f, 0.0f, 1e30f, -1e-30f};
  const std::vector<double> f64{0.25, -1e300};
  const std::vector<uint16_t> f16{0x3c00, 0xc000, 0x7c00};
  const std::vector<int16_t> i16{-32768, 32767, 0, 1};
  const std::vector<int32_t> i32{-7};
  const std::vector<int64_t> i64{INT64_MIN, INT64_MAX};
  const std::vector<uint8_t> u8{0, 255, 128};

  auto check = [&](DType dt, const std::vector<int64_t>& shape, const void* data, size_t bytes) {
    SCOPED_TRACE(dtype_name(dt));
    const std::string path = dir_.file("a.npy");
    write_npy(path, dt, shape, data);
    const NpyHeader h = read_npy_header(path);
    EXPECT_EQ(to_crest_dtype(h.dtype), dt);
    EXPECT_EQ(h.shape, shape);
    EXPECT_FALSE(h.big_endian);
    EXPECT_FALSE(h.fortran_order);
    EXPECT_EQ(h.data_offset % 64, 0u);
    EXPECT_EQ(h.data_bytes, bytes);
    const NpyArray a = read_npy(path);
    EXPECT_EQ(a.shape, shape);
    ASSERT_EQ(a.data.size(), bytes);
    if (bytes) {
      EXPECT_EQ(std::memcmp(a.data.data(), data, bytes), 0);
    }
    std::vector<std::byte> into(bytes);
    read_npy_into(path, dt, shape, into.data());
    EXPECT_EQ(into, a.data);
  };
  check(DType::f32, {2, 3}, f32.data(), 24);
  check(DType::f64, {2}, f64.data(), 16);
  check(DType::f16, {3}, f16.data(), 6);
  check(DType::i16, {2, 1, 2}, i16.data(), 8);
  check(DType::i32, {}, i32.data(), 4);  // scalar
  check(DType::i64, {2}, i64.data(), 16);
  check(DType::u8, {3, 1}, u8.data(), 3);
  check(DType::f32, {0, 4}, nullptr, 0);  // empty
  EXPECT_EQ(dir_.listing(), std::vector<std::string>{"a.npy"});

  const bool flags[3] = {true, false, true};
  write_npy(dir_.file("b.npy"), NpyDType::b1, {3}, flags);
  EXPECT_EQ(read_npy(dir_.file("b.npy")).descr, "|b1");
  expect_input_error([&] { write_npy(dir_.file("c.npy"), DType::bf16, {1}, f16.data()); },
                     {"bfloat16"});
}

TEST_F(NpyTest, WritesExactlyTheBytesNumpyWrites) {
  std::vector<float> f(6);
  for (int i = 0; i < 6; ++i) f[static_cast<size_t>(i)] = static_cast<float>(i);
  write_npy(dir_.file("f.npy"), DType::f32, {2, 3}, f.data());
  EXPECT_EQ(read_file_bytes(dir_.file("f.npy")),
            read_file_bytes(fixture_path("written_by_numpy_f4_2x3.npy")));
  const int16_t s = -7;
  write_npy(dir_.file("s.npy"), DType::i16, {}, &s);
  EXPECT_EQ(read_file_bytes(dir_.file("s.npy")),
            read_file_bytes(fixture_path("written_by_numpy_i16_scalar.npy")));
  const uint8_t u[5] = {0, 1, 2, 3, 4};
  write_npy(dir_.file("u.npy"), DType::u8, {5}, u);
  EXPECT_EQ(read_file_bytes(dir_.file("u.npy")),
            read_file_bytes(fixture_path("written_by_numpy_u8_5.npy")));
}

TEST_F(NpyTest, HugeHeaderSwitchesToVersion2) {
  // 30,000 dimensions of 1 need a ~90 KB header, more than version 1.0's 16-bit length allows.
  // (Only the writer is exercised: the reader caps the rank at 64.)
  std::vector<int64_t> shape(30000, 1);
  const float v = 2.0f;
  write_npy(dir_.file("wide.npy"), DType::f32, shape, &v);
  const auto bytes = read_file_bytes(dir_.file("wide.npy"));
  EXPECT_EQ(std::to_integer<int>(bytes[6]), 2);
  EXPECT_EQ(bytes.size() % 64, 4u);  // 64-aligned header, then 4 data bytes
}

TEST_F(NpyTest, ReadsFilesWrittenByNumpy) {
  {
    const NpyArray a = read_npy(fixture_path("f4_2x3.npy"));
    EXPECT_EQ(a.descr, "<f4");
    EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(values_of<float>(a), (std::vector<float>{-1, -0.5f, 0, 0.5f, 1, 1.5f}));
  }
  {
    const NpyHeader h = read_npy_header(fixture_path("f8_v2.npy"));
    EXPECT_EQ(h.version_major, 2);
    const NpyArray a = read_npy(fixture_path("f8_v2.npy"));
    const auto v = values_of<double>(a);
    ASSERT_EQ(v.size(), 4u);
    EXPECT_DOUBLE_EQ(v[1], 1.0 / 3);
  }
  {
    EXPECT_EQ(read_npy_header(fixture_path("f4_v3.npy")).version_major, 3);
    EXPECT_EQ(values_of<float>(read_npy(fixture_path("f4_v3.npy"))),
              (std::vector<float>{1.5f, -2.0f}));
  }
  {
    const NpyHeader h = read_npy_header(fixture_path("i4_big_endian.npy"));
    EXPECT_TRUE(h.big_endian);
    EXPECT_EQ(h.descr, ">i4");
    EXPECT_EQ(values_of<int32_t>(read_npy(fixture_path("i4_big_endian.npy"))),
              (std::vector<int32_t>{-2, 1, 65536, -70000}));
    std::vector<int32_t> into(4);
    read_npy_into(fixture_path("i4_big_endian.npy"), DType::i32, {2, 2}, into.data());
    EXPECT_EQ(into, (std::vector<int32_t>{-2, 1, 65536, -70000}));
  }
  EXPECT_EQ(values_of<double>(read_npy(fixture_path("f8_big_endian.npy"))),
            (std::vector<double>{0.25, -1e300, 3.0}));
  {
    const NpyArray a = read_npy(fixture_path("f8_scalar.npy"));
    EXPECT_TRUE(a.shape.empty());
    EXPECT_EQ(a.numel(), 1);
    EXPECT_EQ(values_of<double>(a), std::vector<double>{2.5});
  }
  {
    const NpyArray a = read_npy(fixture_path("i8_empty.npy"));
    EXPECT_EQ(a.shape, (std::vector<int64_t>{0, 5}));
    EXPECT_TRUE(a.data.empty());
  }
  {
    // Fortran order is transposed to C order on read.
    EXPECT_TRUE(read_npy_header(fixture_path("i2_fortran.npy")).fortran_order);
    const NpyArray a = read_npy(fixture_path("i2_fortran.npy"));
    EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3, 4}));
    std::vector<int16_t> expected(24);
    for (int i = 0; i < 24; ++i) expected[static_cast<size_t>(i)] = static_cast<int16_t>(i);
    EXPECT_EQ(values_of<int16_t>(a), expected);
    std::vector<int16_t> into(24);
    read_npy_into(fixture_path("i2_fortran.npy"), DType::i16, {2, 3, 4}, into.data());
    EXPECT_EQ(into, expected);
  }
  EXPECT_EQ(values_of<uint16_t>(read_npy(fixture_path("f2_3.npy"))),
            (std::vector<uint16_t>{0x3c00, 0xc000, 0x3800}));
  EXPECT_EQ(values_of<uint8_t>(read_npy(fixture_path("b1_3.npy"))),
            (std::vector<uint8_t>{1, 0, 1}));
  EXPECT_EQ(read_npy(fixture_path("b1_3.npy")).dtype, NpyDType::b1);
  EXPECT_EQ(values_of<uint8_t>(read_npy(fixture_path("u1_4.npy"))),
            (std::vector<uint8_t>{0, 1, 128, 255}));
  EXPECT_EQ(values_of<int8_t>(read_npy(fixture_path("i1_3.npy"))),
            (std::vector<int8_t>{-128, 0, 127}));
}

TEST_F(NpyTest, ReadIntoNamesFoundAndExpected) {
  const std::string path = fixture_path("f4_2x3.npy");
  std::vector<float> dst(6);
  expect_input_error(
      [&] {
        read_npy_into(path, DType::f32, {3, 2}, dst.data());
      },
      {path, "float32 ('<f4') [2, 3], expected f32 [3, 2]"});
  expect_input_error(
      [&] {
        read_npy_into(path, DType::f64, {2, 3}, dst.data());
      },
      {path, "expected f64 [2, 3]"});
  expect_input_error([&] { read_npy_into(fixture_path("b1_3.npy"), DType::u8, {3}, dst.data()); },
                     {"bool ('|b1') [3], expected u8 [3]"});
}

// Damaged files, each built from a valid numpy-written one.
TEST_F(NpyTest, RejectsDamagedFiles) {
  const auto good = read_file_bytes(fixture_path("f4_2x3.npy"));  // 128-byte header + 24 bytes
  const std::string path = dir_.file("bad.npy");
  auto rejects = [&](const std::vector<std::byte>& bytes, const std::string& needle) {
    write_file_bytes(path, bytes);
    expect_input_error([&] { (void)read_npy(path); }, {path + ": ", needle});
    expect_input_error([&] { (void)read_npy_header(path); }, {path + ": ", needle});
  };
  auto with_header = [&](const std::string& dict, size_t data_bytes = 24) {
    std::string h = dict;
    h.append((64 - (10 + h.size() + 1) % 64) % 64, ' ');
    h += '\n';
    std::vector<std::byte> out = bytes_of(std::string("\x93NUMPY\x01\x00", 8));
    out.push_back(static_cast<std::byte>(h.size() & 0xff));
    out.push_back(static_cast<std::byte>(h.size() >> 8));
    for (auto b : bytes_of(h)) out.push_back(b);
    out.resize(out.size() + data_bytes);
    return out;
  };

  auto b = good;
  b[1] = std::byte{'X'};
  rejects(b, "bad magic");
  rejects(bytes_of("\x93NUM"), "not a .npy file: only 4 bytes");
  b = good;
  b[6] = std::byte{4};
  rejects(b, "unsupported .npy format version 4.0");
  b = good;
  b[8] = std::byte{0xff};
  b[9] = std::byte{0xff};
  rejects(b, "header length 65535 runs past the end");
  b = good;
  b.resize(good.size() - 5);
  rejects(b, "truncated: shape [2, 3] of dtype '<f4' needs 24 data bytes, the file has 19");
  b = good;
  b.push_back(std::byte{0});
  rejects(b, "1 bytes after the array data");

  const std::string ok_tail = "'fortran_order': False, 'shape': (2, 3), }";
  rejects(with_header("{'descr': '<f4', " + ok_tail + "x"), "unexpected text after");
  rejects(with_header("{'descr': '<f4', 'fortran_order': False, }"), "missing key 'shape'");
  rejects(with_header("{'descr': '<f4', 'fortran_order': Nope, 'shape': (2, 3), }"),
          "expected True or False");
  rejects(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }"),
          "expected a non-negative integer");
  rejects(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, }"),
          "unparseable .npy header");
  rejects(with_header("{'descr': '<f4', 'extra': 1, " + ok_tail), "unexpected key 'extra'");
  rejects(with_header("{'descr': [('a', '<f4')], " + ok_tail), "structured dtypes");
  rejects(with_header("{'descr': '<c8', " + ok_tail), "unsupported dtype '<c8'");
  rejects(with_header("{'descr': '|f4', " + ok_tail), "unsupported dtype '|f4'");
  rejects(with_header("{'descr': 'O', " + ok_tail), "unsupported dtype 'O'");
  rejects(with_header("{'descr': '<f4, " + ok_tail), "unparseable .npy header");
  rejects(with_header("{'descr': '<f4', 'fortran_order': False, "
                      "'shape': (4294967296, 4294967296, 4294967296), }"),
          "is too large");
  rejects(
      with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }"),
      "shape entry too large");
  expect_input_error([&] { (void)read_npy(dir_.file("missing.npy")); },
                     {dir_.file("missing.npy"), "cannot open"});
}

// Random damage to the header of a valid file: success or a crest::Error, never a crash.
TEST_F(NpyTest, FuzzedHeadersNeverCrash) {
  const auto good = read_file_bytes(fixture_path("i2_fortran.npy"));
  const std::string path = dir_.file("fuzz.npy");
  std::mt19937 gen(77);
  int errors = 0;
  for (int i = 0; i < 800; ++i) {
    auto b = good;
    const int flips = 1 + static_cast<int>(gen() % 3);
    for (int k = 0; k < flips; ++k) b[gen() % 128] = static_cast<std::byte>(gen() & 0xff);
    if (gen() % 5 == 0) b.resize(gen() % b.size());
    write_file_bytes(path, b);
    try {
      const NpyArray a = read_npy(path);
      EXPECT_EQ(a.data.size(), static_cast<size_t>(a.numel()) * npy_dtype_size(a.dtype));
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::input);
      ++errors;
    }
  }
  EXPECT_GT(errors, 0);
}

// A spatial split's block of a [4, 5, 3, 2] int16 array: every block along one axis and along
// two, the values those of the whole array's box and the bytes read exactly the block's (one
// read per contiguous run); a wrong dtype or shape is refused as read_npy_into refuses it.
TEST_F(NpyTest, ReadsABlockOfTheLeadingAxesAndOnlyItsBytes) {
  const std::vector<int64_t> shape{4, 5, 3, 2};
  std::vector<int16_t> whole(size_t{4} * 5 * 3 * 2);
  for (size_t i = 0; i < whole.size(); ++i) whole[i] = static_cast<int16_t>(i * 7 - 100);
  const std::string path = dir_.file("volume.npy");
  write_npy(path, DType::i16, shape, whole.data());
  const auto at = [&](int64_t d, int64_t h, int64_t w, int64_t c) {
    return whole[static_cast<size_t>(((d * 5 + h) * 3 + w) * 2 + c)];
  };
  int checked = 0;
  for (const auto& [begin, end] :
       {std::pair<std::vector<int64_t>, std::vector<int64_t>>{{1, 0, 0}, {3, 5, 3}},
        {{0, 2, 0}, {4, 5, 3}},
        {{0, 0, 1}, {4, 5, 2}},
        {{2, 1, 0}, {4, 4, 3}},
        {{0, 3, 2}, {4, 5, 3}},
        {{0, 0, 0}, {4, 5, 3}}}) {
    std::vector<int16_t> block(
        static_cast<size_t>((end[0] - begin[0]) * (end[1] - begin[1]) * (end[2] - begin[2]) * 2));
    const uint64_t read = read_npy_block_into(path, DType::i16, shape, begin, end, block.data());
    EXPECT_EQ(read, block.size() * 2);
    size_t k = 0;
    for (int64_t d = begin[0]; d < end[0]; ++d)
      for (int64_t h = begin[1]; h < end[1]; ++h)
        for (int64_t w = begin[2]; w < end[2]; ++w)
          for (int64_t c = 0; c < 2; ++c) ASSERT_EQ(block[k++], at(d, h, w, c)) << d << h << w;
    ++checked;
  }
  EXPECT_EQ(checked, 6);
  std::vector<int16_t> out(8);
  expect_input_error([&] { read_npy_block_into(path, DType::f32, shape, {0}, {1}, out.data()); },
                     {"volume.npy", "array is int16", "expected f32"});
}

}  // namespace
}  // namespace crest
