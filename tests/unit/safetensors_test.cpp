// safetensors reader/writer: round trips, interop with the Python package, and every defect the
// reader must reject with an error that names the file.
#include "crest/data/safetensors.hpp"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "crest/core/error.hpp"

namespace crest {
namespace {

namespace fs = std::filesystem;

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "crest-safetensors-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string file(const std::string& name) const { return (dir_ / name).string(); }

  static std::string read_bytes(const std::string& path) {
    // Sized read rather than istreambuf_iterator, which trips GCC 12's -Wnull-dereference.
    std::string out(fs::file_size(path), '\0');
    std::ifstream in(path, std::ios::binary);
    in.read(out.data(), static_cast<std::streamsize>(out.size()));
    return out;
  }
  static void write_bytes(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  // A file from its parts; `declared` overrides the header length field when given.
  static std::string raw_file(const std::string& header, const std::string& buffer,
                              int64_t declared = -1) {
    uint64_t n = declared < 0 ? header.size() : static_cast<uint64_t>(declared);
    std::string out(8, '\0');
    for (int i = 0; i < 8; ++i)
      out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
    return out + header + buffer;
  }
  // Names of the files in the test directory: a failed write must leave no temporary behind.
  std::vector<std::string> listing() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  }

  // Opening `path` must throw crest::Error (input) whose message names the file and contains
  // `needle`.
  static void expect_rejected(const std::string& path, const std::string& needle) {
    try {
      SafetensorsFile f(path);
      ADD_FAILURE() << "expected an error containing '" << needle << "' for " << path;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::input);
      EXPECT_EQ(e.exit_code(), 2);
      const std::string msg = e.what();
      EXPECT_NE(msg.find(path), std::string::npos) << msg;
      EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    }
  }

  fs::path dir_;
};

TEST_F(SafetensorsTest, RoundTripsSeveralDtypesAndShapes) {
  std::vector<float> w(2 * 3 * 4);
  std::iota(w.begin(), w.end(), -5.0f);
  std::vector<double> b{0.25, -1e300, 3.0, 4.5, 1e-300};
  std::vector<uint16_t> bf{0x3f80, 0xc000, 0x7f80};  // bf16 bits: 1, -2, inf
  std::vector<uint16_t> half{0x3c00, 0x4000, 0xbc00, 0x0000};
  std::vector<int64_t> step{int64_t{1} << 40, -7, 0};
  int32_t scalar = -123456;
  std::vector<int16_t> s16{-32768, 0, 1, 32767};
  std::vector<uint8_t> bytes{1, 2, 3};

  const std::string path = file("model.safetensors");
  write_safetensors(path,
                    {{"conv.w", DType::f32, Shape{2, 3, 4}, w.data()},
                     {"dense.b", DType::f64, Shape{5}, b.data()},
                     {"bf", DType::bf16, Shape{3}, bf.data()},
                     {"half", DType::f16, Shape{2, 2}, half.data()},
                     {"step", DType::i64, Shape{3}, step.data()},
                     {"scalar", DType::i32, Shape{}, &scalar},
                     {"s16", DType::i16, Shape{1, 4}, s16.data()},
                     {"u8", DType::u8, Shape{3, 1}, bytes.data()},
                     {"empty", DType::f32, Shape{0, 7}, nullptr}},
                    {{"epoch", "3"}, {"format", "pt"}});

  SafetensorsFile f(path);
  EXPECT_EQ(f.tensors().size(), 9u);
  EXPECT_EQ(f.metadata().at("epoch"), "3");
  EXPECT_EQ(f.metadata().at("format"), "pt");
  auto check = [&](const std::string& name, SafetensorsDType dt, std::vector<int64_t> shape,
                   const void* data, size_t n) {
    SCOPED_TRACE(name);
    const SafetensorsTensor& t = f.at(name);
    EXPECT_EQ(t.dtype, dt);
    EXPECT_EQ(t.shape, shape);
    ASSERT_EQ(t.bytes, n);
    if (n) {
      EXPECT_EQ(std::memcmp(t.data, data, n), 0);
    }
    // The writer orders by element size, so a mapped file gives aligned pointers.
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % safetensors_dtype_size(dt), 0u);
  };
  check("conv.w", SafetensorsDType::F32, {2, 3, 4}, w.data(), w.size() * 4);
  check("dense.b", SafetensorsDType::F64, {5}, b.data(), b.size() * 8);
  check("bf", SafetensorsDType::BF16, {3}, bf.data(), 6);
  check("half", SafetensorsDType::F16, {2, 2}, half.data(), 8);
  check("step", SafetensorsDType::I64, {3}, step.data(), 24);
  check("scalar", SafetensorsDType::I32, {}, &scalar, 4);
  check("s16", SafetensorsDType::I16, {1, 4}, s16.data(), 8);
  check("u8", SafetensorsDType::U8, {3, 1}, bytes.data(), 3);
  check("empty", SafetensorsDType::F32, {0, 7}, nullptr, 0);
  EXPECT_EQ(f.at("conv.w").crest_shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(to_crest_dtype(f.at("bf").dtype), DType::bf16);

  std::vector<float> back(w.size());
  f.read_into("conv.w", DType::f32, Shape{2, 3, 4}, back.data());
  EXPECT_EQ(back, w);
  try {
    f.read_into("conv.w", DType::f32, Shape{4, 3, 2}, back.data());
    ADD_FAILURE() << "shape mismatch not detected";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find("conv.w"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[2, 3, 4]"), std::string::npos) << msg;
  }
  EXPECT_THROW(f.read_into("conv.w", DType::f64, Shape{2, 3, 4}, back.data()), Error);
  try {
    (void)f.at("missing");
    ADD_FAILURE() << "missing tensor not detected";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing"), std::string::npos);
  }

  // Moving the file keeps the mapping valid.
  SafetensorsFile moved = std::move(f);
  EXPECT_EQ(moved.at("step").numel(), 3);
  EXPECT_EQ(std::memcmp(moved.at("step").data, step.data(), 24), 0);
}

TEST_F(SafetensorsTest, WritesDeterministicBytes) {
  const float x[2] = {1.0f, 2.0f};
  const int16_t y[3] = {1, 2, 3};
  write_safetensors(file("a"), {{"x", DType::f32, Shape{2}, x}, {"y", DType::i16, Shape{3}, y}});
  write_safetensors(file("b"), {{"y", DType::i16, Shape{3}, y}, {"x", DType::f32, Shape{2}, x}});
  EXPECT_EQ(read_bytes(file("a")), read_bytes(file("b")));
  // The data buffer starts at an 8-byte file offset (header padded with spaces).
  const std::string bytes = read_bytes(file("a"));
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ((8 + n) % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + n + 8 + 6);
}

TEST_F(SafetensorsTest, EmptyFileWithoutTensorsRoundTrips) {
  write_safetensors(file("none"), {});
  SafetensorsFile f(file("none"));
  EXPECT_TRUE(f.tensors().empty());
  EXPECT_TRUE(f.metadata().empty());
}

// tests/fixtures/numpy_written.safetensors comes from the Python `safetensors` package
// (tests/fixtures/make_safetensors_fixture.py); the values are closed forms of the index.
TEST_F(SafetensorsTest, ReadsFileWrittenByPythonPackage) {
  SafetensorsFile f(std::string(CREST_SOURCE_DIR) + "/tests/fixtures/numpy_written.safetensors");
  EXPECT_EQ(f.metadata().at("format"), "np");
  EXPECT_EQ(f.tensors().size(), 11u);

  const auto& w = f.at("conv.weight");
  EXPECT_EQ(w.dtype, SafetensorsDType::F32);
  EXPECT_EQ(w.shape, (std::vector<int64_t>{2, 3, 4}));
  std::vector<float> wv(24);
  f.read_into("conv.weight", DType::f32, Shape{2, 3, 4}, wv.data());
  for (int i = 0; i < 24; ++i) EXPECT_EQ(wv[static_cast<size_t>(i)], i * 0.5f - 3) << i;

  std::vector<double> bv(5);
  f.read_into("dense.bias", DType::f64, Shape{5}, bv.data());
  for (int i = 0; i < 5; ++i) EXPECT_DOUBLE_EQ(bv[static_cast<size_t>(i)], i / 3.0) << i;

  uint16_t hv[6];
  f.read_into("half", DType::f16, Shape{3, 2}, hv);
  EXPECT_EQ(hv[0], 0xc000);  // -2 in IEEE half
  EXPECT_EQ(hv[2], 0x0000);
  EXPECT_EQ(hv[5], 0x4200);  // 3

  int64_t sv[3];
  f.read_into("step", DType::i64, Shape{3}, sv);
  EXPECT_EQ(sv[2], 2 * int64_t{1000000007});

  int32_t iv[4];
  f.read_into("i32", DType::i32, Shape{4}, iv);
  EXPECT_EQ(iv[0], -140000);
  int16_t i16[4];
  f.read_into("i16", DType::i16, Shape{4}, i16);
  EXPECT_EQ(i16[3], -297);
  uint8_t u8[4];
  f.read_into("u8", DType::u8, Shape{4}, u8);
  EXPECT_EQ(u8[3], 180);

  // Types crest cannot compute with are still described exactly.
  const auto& i8 = f.at("i8");
  EXPECT_EQ(i8.dtype, SafetensorsDType::I8);
  EXPECT_FALSE(to_crest_dtype(i8.dtype).has_value());
  EXPECT_EQ(static_cast<int8_t>(i8.data[0]), -2);
  const auto& mask = f.at("mask");
  EXPECT_EQ(mask.dtype, SafetensorsDType::BOOL);
  ASSERT_EQ(mask.bytes, 3u);
  EXPECT_EQ(static_cast<int>(mask.data[1]), 0);
  EXPECT_EQ(static_cast<int>(mask.data[2]), 1);

  EXPECT_TRUE(f.at("scalar").shape.empty());
  float scalar = 0;
  f.read_into("scalar", DType::f32, Shape{}, &scalar);
  EXPECT_EQ(scalar, 7.25f);
  EXPECT_EQ(f.at("empty").numel(), 0);
}

TEST_F(SafetensorsTest, RejectsMissingFile) {
  expect_rejected(file("nope.safetensors"), "cannot open");
}

TEST_F(SafetensorsTest, RejectsTruncatedFiles) {
  const float x[4] = {1, 2, 3, 4};
  write_safetensors(file("good"), {{"x", DType::f32, Shape{4}, x}});
  const std::string good = read_bytes(file("good"));

  write_bytes(file("tiny"), good.substr(0, 5));
  expect_rejected(file("tiny"), "truncated");
  write_bytes(file("nohdr"), good.substr(0, 20));  // cut inside the header
  expect_rejected(file("nohdr"), "header length");
  write_bytes(file("nodata"), good.substr(0, good.size() - 4));  // cut inside the data
  expect_rejected(file("nodata"), "outside the");
  write_bytes(file("empty"), "");
  expect_rejected(file("empty"), "truncated");
}

TEST_F(SafetensorsTest, RejectsHeaderLengthBeyondFile) {
  // An absurd length must be refused before any allocation or parse.
  write_bytes(file("huge"), raw_file("{}", "", int64_t{1} << 62));
  expect_rejected(file("huge"), "header length 4611686018427387904 exceeds");
  write_bytes(file("plus1"), raw_file("{}", "", 3));
  expect_rejected(file("plus1"), "exceeds");
}

TEST_F(SafetensorsTest, RejectsBadJson) {
  write_bytes(file("bad"), raw_file("{\"x\": {\"dtype\": \"F32\",", ""));
  expect_rejected(file("bad"), "invalid JSON header");
  write_bytes(file("array"), raw_file("[1, 2]", ""));
  expect_rejected(file("array"), "not an object");
  write_bytes(file("dup"), raw_file(R"({"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                                    R"("x":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                                    "ab"));
  expect_rejected(file("dup"), "duplicate key \"x\"");
  write_bytes(file("meta"), raw_file(R"({"__metadata__":{"epoch":3}})", ""));
  expect_rejected(file("meta"), "__metadata__ value for \"epoch\"");
}

TEST_F(SafetensorsTest, RejectsBadEntries) {
  struct Case {
    const char* name;
    std::string header;
    std::string buffer;
    const char* needle;
  };
  const std::vector<Case> cases = {
      {"range", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", "1234",
       "tensor \"w\": data_offsets [0, 8] outside the 4-byte data buffer"},
      {"length", R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", "12345678",
       "tensor \"w\": 8 data bytes, but dtype F32 and shape [3] need 12"},
      {"reversed", R"({"w":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}})", "1234",
       "end before begin"},
      {"overlap",
       R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
       R"("b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})",
       "123456", "overlaps"},
      {"gap", R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})", "1234", "gap of 2"},
      {"trailing", R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})", "1234",
       "belong to no tensor"},
      {"dtype", R"({"a":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}})", "1",
       "unsupported dtype \"F8_E4M3\""},
      {"negative", R"({"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,0]}})", "",
       "shape[0] is negative"},
      {"float_dim", R"({"a":{"dtype":"U8","shape":[1.5],"data_offsets":[0,0]}})", "",
       "must be a non-negative integer"},
      {"overflow", R"({"a":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,0]}})",
       "", "too large"},
      {"missing", R"({"a":{"dtype":"U8","shape":[1]}})", "1", "missing field \"data_offsets\""},
      {"extra", R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":1}})", "1",
       "unexpected field \"x\""},
      {"offsets", R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0]}})", "1",
       "data_offsets must be [begin, end]"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    write_bytes(file(c.name), raw_file(c.header, c.buffer));
    expect_rejected(file(c.name), c.needle);
  }
}

TEST_F(SafetensorsTest, InvalidWriteLeavesPreviousFileIntact) {
  const float x[2] = {1, 2};
  const std::string path = file("ckpt.safetensors");
  write_safetensors(path, {{"x", DType::f32, Shape{2}, x}});
  const std::string before = read_bytes(path);
  const auto files_before = listing();

  EXPECT_THROW(
      write_safetensors(path, {{"x", DType::f32, Shape{2}, x}, {"x", DType::f32, Shape{2}, x}}),
      Error);
  EXPECT_THROW(write_safetensors(path, {{"y", DType::f32, Shape{2}, nullptr}}), Error);
  EXPECT_THROW(write_safetensors(path, {{"__metadata__", DType::f32, Shape{2}, x}}), Error);
  EXPECT_EQ(read_bytes(path), before);
  EXPECT_EQ(listing(), files_before);

  try {
    write_safetensors(file("no/such/dir/out.safetensors"), {{"x", DType::f32, Shape{2}, x}});
    ADD_FAILURE() << "write into a missing directory succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
    EXPECT_NE(std::string(e.what()).find("no/such/dir/out.safetensors"), std::string::npos);
  }
}

TEST_F(SafetensorsTest, FailedWriteMidFileLeavesPreviousFileIntact) {
  const std::string path = file("ckpt.safetensors");
  const float x[2] = {1, 2};
  write_safetensors(path, {{"x", DType::f32, Shape{2}, x}});
  const std::string before = read_bytes(path);
  const auto files_before = listing();

  // A file-size limit makes write() fail half way (EFBIG), like a full disk would, without
  // needing one. SIGXFSZ is ignored so the failure arrives as an error code.
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  rlimit small = old;
  small.rlim_cur = 4096;
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  std::vector<float> big(1 << 16, 3.0f);
  bool threw = false;
  std::string msg;
  try {
    write_safetensors(path, {{"big", DType::f32, Shape{1 << 16}, big.data()}});
  } catch (const Error& e) {
    threw = true;
    msg = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);

  ASSERT_TRUE(threw);
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("write failed"), std::string::npos) << msg;
  EXPECT_EQ(read_bytes(path), before);
  EXPECT_EQ(listing(), files_before);  // the temporary file was removed
  SafetensorsFile f(path);
  EXPECT_EQ(f.names(), std::vector<std::string>{"x"});
}

// Tensor by tensor, in the order the writer gives, with a metadata value replaced at the end by
// one of the same length: the very bytes write_safetensors writes with that value.
TEST_F(SafetensorsTest, AStreamedWriteIsTheWholeWritesBytes) {
  const double d[3] = {1, 2, 3};
  const float x[2] = {4, 5}, y[1] = {6};
  const std::vector<SafetensorsEntry> tensors = {{"y", DType::f32, Shape{1}, y},
                                                 {"d", DType::f64, Shape{3}, d},
                                                 {"x", DType::f32, Shape{2}, x}};
  write_safetensors(file("whole"), tensors, {{"sum", "0123"}, {"k", "v"}});
  std::vector<SafetensorsEntry> layout = tensors;
  for (auto& e : layout) e.data = nullptr;  // the layout alone
  SafetensorsWriter out(file("streamed"), layout, {{"sum", "xxxx"}, {"k", "v"}});
  EXPECT_EQ(out.order(), (std::vector<size_t>{1, 2, 0}));  // 8-byte elements first, then names
  for (size_t i : out.order()) out.write_next(tensors[i].data);
  out.replace_metadata("sum", "0123");
  EXPECT_TRUE(fs::exists(file("streamed")) == false);  // nothing under the name before commit
  out.commit();
  EXPECT_EQ(read_bytes(file("streamed")), read_bytes(file("whole")));
}

// A writer given up before every tensor is written (its source failed) leaves no file and no
// temporary behind, and the earlier file at the path as it was; a value of another length cannot
// replace the placeholder.
TEST_F(SafetensorsTest, AStreamedWriteGivenUpLeavesNothing) {
  const float x[2] = {1, 2};
  const std::string path = file("ckpt.safetensors");
  write_safetensors(path, {{"x", DType::f32, Shape{2}, x}});
  const std::string before = read_bytes(path);
  {
    SafetensorsWriter out(path, {{"a", DType::f32, Shape{2}}, {"b", DType::f32, Shape{2}}},
                          {{"sum", "xxxx"}});
    out.write_next(x);
    EXPECT_THROW(out.replace_metadata("sum", "12345"), Error);
    EXPECT_THROW(out.commit(), Error);  // "b" not written
  }
  EXPECT_EQ(read_bytes(path), before);
  EXPECT_EQ(listing(), std::vector<std::string>{"ckpt.safetensors"});
}

}  // namespace
}  // namespace crest
