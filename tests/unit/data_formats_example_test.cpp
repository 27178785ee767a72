// tf.train.Example: SPEC.md §3 golden bytes, the CosmoFlow sizes, protobuf parsing rules
// (packed/unpacked, unknown fields, merging), malformed input and a byte-flip fuzz loop.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "crest/data/formats/example.hpp"
#include "crest/data/formats/tfrecord.hpp"
#include "unit/data_formats_test_util.hpp"

namespace crest {
namespace {

using test::bytes_of;
using test::expect_input_error;
using test::from_hex;
using Kind = ExampleFeature::Kind;
using Bytes = std::vector<std::byte>;

// Minimal protobuf writer for hand-made test messages.
Bytes varint(uint64_t v) {
  Bytes out;
  while (v >= 0x80) {
    out.push_back(static_cast<std::byte>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<std::byte>(v));
  return out;
}
Bytes cat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}
Bytes tag(uint32_t field, uint32_t wire_type) { return varint((uint64_t{field} << 3) | wire_type); }
Bytes ld(uint32_t field, const Bytes& body) {
  return cat({tag(field, 2), varint(body.size()), body});
}
Bytes f32(float v) {
  Bytes out(4);
  std::memcpy(out.data(), &v, 4);
  return out;
}
Bytes entry(const std::string& key, const Bytes& feature) {
  return ld(1, cat({ld(1, bytes_of(key)), ld(2, feature)}));
}
Bytes example(const Bytes& entries) { return ld(1, entries); }

std::string hex(const Bytes& b) {
  std::string out;
  char buf[3];
  for (auto x : b) {
    std::snprintf(buf, sizeof buf, "%02x", std::to_integer<unsigned>(x));
    out += buf;
  }
  return out;
}

TEST(ExampleTest, EncodesAndDecodesTheSpecGolden) {
  const float y[1] = {1.0f};
  ExampleBuilder b;
  b.add_floats("y", y);
  EXPECT_EQ(hex(b.encode()), "0a0f0a0d0a0179120812060a040000803f");
  EXPECT_EQ(b.encoded_size(), 17u);

  const Bytes golden = from_hex("0a0f0a0d0a0179120812060a040000803f");
  const ExampleView v = ExampleView::parse(golden, "golden");
  EXPECT_EQ(v.names(), std::vector<std::string>{"y"});
  EXPECT_EQ(v.at("y", Kind::floats).floats, std::vector<float>{1.0f});
}

TEST(ExampleTest, CosmoflowSampleHasTheSpecSizes) {
  Bytes volume(16777216);
  for (size_t i = 0; i < volume.size(); i += 4097) volume[i] = static_cast<std::byte>(i & 0xff);
  const float y[4] = {0.5f, -0.25f, 0.125f, 1.0f};
  ExampleBuilder b;
  b.add_bytes("x", volume).add_floats("y", y);
  EXPECT_EQ(b.encoded_size(), 16777271u);
  const Bytes record = b.encode();
  ASSERT_EQ(record.size(), 16777271u);
  EXPECT_EQ(record.size() + kTfRecordFramingBytes, 16777287u);

  test::ScratchDir dir;
  TfRecordWriter w(dir.file("sample.tfrecord"));
  w.write(record);
  w.close();
  EXPECT_EQ(std::filesystem::file_size(dir.file("sample.tfrecord")), 16777287u);

  const ExampleView v = ExampleView::parse(record, "sample");
  const auto& x = v.at("x", Kind::bytes);
  ASSERT_EQ(x.bytes.size(), 1u);
  ASSERT_EQ(x.bytes[0].size(), volume.size());
  // Zero-copy: the value points into the record.
  EXPECT_GE(x.bytes[0].data(), record.data());
  EXPECT_LE(x.bytes[0].data() + x.bytes[0].size(), record.data() + record.size());
  EXPECT_EQ(std::memcmp(x.bytes[0].data(), volume.data(), volume.size()), 0);
  EXPECT_EQ(v.at("y", Kind::floats).floats, std::vector<float>(y, y + 4));
}

TEST(ExampleTest, RoundTripsEveryKind) {
  const Bytes a = bytes_of("alpha"), empty;
  const float floats[3] = {1.5f, -0.0f, 3.25e-20f};
  const int64_t ints[5] = {0, 1, -1, INT64_MIN, INT64_MAX};
  ExampleBuilder b;
  b.add_bytes_list("list", {a, empty, a})
      .add_floats("f", floats)
      .add_int64s("i", ints)
      .add_floats("no_floats", {})
      .add_int64s("no_ints", {})
      .add_bytes_list("no_bytes", {})
      .add_bytes("", a);
  const Bytes record = b.encode();
  EXPECT_EQ(record.size(), b.encoded_size());
  const ExampleView v = ExampleView::parse(record, "rt");
  EXPECT_EQ(v.names(),
            (std::vector<std::string>{"", "f", "i", "list", "no_bytes", "no_floats", "no_ints"}));
  const auto& list = v.at("list", Kind::bytes);
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(Bytes(list.bytes[0].begin(), list.bytes[0].end()), a);
  EXPECT_TRUE(list.bytes[1].empty());
  EXPECT_EQ(v.at("f", Kind::floats).floats, std::vector<float>(floats, floats + 3));
  EXPECT_EQ(v.at("i", Kind::int64s).int64s, std::vector<int64_t>(ints, ints + 5));
  EXPECT_EQ(v.at("no_floats", Kind::floats).size(), 0u);
  EXPECT_EQ(v.at("no_ints", Kind::int64s).size(), 0u);
  EXPECT_EQ(v.at("no_bytes", Kind::bytes).size(), 0u);
  EXPECT_EQ(v.at("", Kind::bytes).size(), 1u);
  // Deterministic: insertion order does not matter.
  ExampleBuilder c;
  c.add_bytes("", a)
      .add_bytes_list("no_bytes", {})
      .add_int64s("no_ints", {})
      .add_floats("no_floats", {})
      .add_int64s("i", ints)
      .add_floats("f", floats)
      .add_bytes_list("list", {a, empty, a});
  EXPECT_EQ(c.encode(), record);
  EXPECT_EQ(ExampleView::parse(ExampleBuilder().encode(), "empty").size(), 0u);
  expect_input_error([&] { c.add_floats("f", floats); }, {"\"f\" added twice"});
}

TEST(ExampleTest, AcceptsWhatAnyProtobufWriterMayProduce) {
  const Bytes record = example(cat({
      // Unpacked floats (one fixed32 field each), twice merged into one list.
      entry("unpacked_f", ld(2, cat({tag(1, 5), f32(1.0f), tag(1, 5), f32(2.0f)}))),
      // Unpacked int64s, then a packed run in the same list: both append.
      entry("mixed_i", ld(3, cat({tag(1, 0), varint(7), ld(1, cat({varint(300), varint(1)}))}))),
      // Map value before key, and unknown fields of every wire type everywhere.
      ld(1, cat({ld(2, ld(1, ld(1, bytes_of("v")))), tag(9, 0), varint(5),
                 ld(1, bytes_of("late_key"))})),
      entry("unknown", cat({tag(15, 1), Bytes(8), tag(16, 5), Bytes(4), tag(17, 0), varint(1 << 30),
                            ld(18, bytes_of("zz")), tag(19, 3), tag(1, 0), varint(1), tag(19, 4),
                            ld(1, ld(1, bytes_of("b")))})),
      // The same key twice: the later entry wins.
      entry("dup", ld(2, ld(1, f32(1.0f)))),
      entry("dup", ld(3, ld(1, varint(42)))),
      // Two list fields in one Feature: for a oneof the last one set wins.
      entry("oneof", cat({ld(1, ld(1, bytes_of("gone"))), ld(2, ld(1, f32(5.0f)))})),
      // A Feature with no list set.
      entry("nothing", {}),
  }));
  const Bytes with_unknown_top = cat({tag(2, 0), varint(3), record, tag(3, 5), Bytes(4)});
  const ExampleView v = ExampleView::parse(with_unknown_top, "any");
  EXPECT_EQ(v.at("unpacked_f", Kind::floats).floats, (std::vector<float>{1.0f, 2.0f}));
  EXPECT_EQ(v.at("mixed_i", Kind::int64s).int64s, (std::vector<int64_t>{7, 300, 1}));
  ASSERT_EQ(v.at("late_key", Kind::bytes).size(), 1u);
  EXPECT_EQ(v.at("unknown", Kind::bytes).size(), 1u);
  EXPECT_EQ(v.at("dup", Kind::int64s).int64s, std::vector<int64_t>{42});
  EXPECT_EQ(v.at("oneof", Kind::floats).floats, std::vector<float>{5.0f});
  EXPECT_EQ(v.find("nothing")->kind, Kind::none);
  EXPECT_EQ(v.find("absent"), nullptr);
}

TEST(ExampleTest, LookupErrorsNameContextFeatureAndKinds) {
  const float y[1] = {1.0f};
  const Bytes record = ExampleBuilder().add_floats("y", y).encode();
  const ExampleView v = ExampleView::parse(record, "data/a.tfrecord: record 0");
  expect_input_error(
      [&] { (void)v.at("y", Kind::bytes); },
      {"data/a.tfrecord: record 0", "\"y\"", "is a float_list, expected a bytes_list"});
  expect_input_error([&] { (void)v.at("x", Kind::bytes); },
                     {"data/a.tfrecord: record 0", "no feature \"x\"", "it has: y"});
}

TEST(ExampleTest, MalformedInputIsAnErrorWithContext) {
  const std::string ctx = "data/bad.tfrecord: record 3";
  auto rejects = [&](const Bytes& b, const std::string& needle) {
    SCOPED_TRACE(hex(b));
    expect_input_error([&] { (void)ExampleView::parse(b, ctx); },
                       {ctx + ": malformed tf.train.Example", needle});
  };
  rejects(from_hex("0a"), "truncated varint");
  rejects(from_hex("0a80"), "truncated varint");
  rejects(from_hex("0a05000000"), "runs past the end (3 bytes left)");
  rejects(from_hex("0aff"), "truncated varint");
  rejects(from_hex("0801"), "has wire type varint, expected length-delimited");
  rejects(cat({from_hex("0a"), Bytes(10, std::byte{0x80}), from_hex("00")}),
          "varint longer than 10 bytes");
  rejects(from_hex("0e"), "invalid wire type 6");
  rejects(from_hex("0f"), "invalid wire type 7");
  rejects(from_hex("0000"), "field number 0 is invalid");
  rejects(from_hex("1b"), "is never closed");                // start-group of field 3, no end
  rejects(from_hex("1b24"), "closes the group of field 3");  // ended by end-group of field 4
  rejects(from_hex("1c"), "end-group without a matching start-group");
  rejects(from_hex("15000000"), "truncated unknown fixed32 field");
  rejects(example(entry("y", ld(2, ld(1, Bytes(5))))), "not a multiple of 4");
  rejects(example(entry("y", ld(2, tag(1, 5)))), "truncated float");
  rejects(example(entry("y", ld(3, ld(1, from_hex("ff"))))), "truncated varint");
  rejects(example(entry("y", ld(1, cat({tag(1, 0), varint(3)})))),
          "feature \"y\": field 1 (BytesList.value) has wire type varint");
  // Groups nested deeper than the decoder's bound.
  Bytes deep;
  for (int i = 0; i < 100; ++i) deep = cat({deep, tag(5, 3)});
  rejects(deep, "nested too deeply");
}

// Random damage to a valid record must end in success or a crest::Error, never a crash, hang or
// runaway allocation (the sanitizer presets run this too).
TEST(ExampleTest, FuzzedRecordsNeverCrash) {
  const Bytes payload = bytes_of("some bytes value");
  const float floats[4] = {0.1f, 0.2f, 0.3f, 0.4f};
  const int64_t ints[3] = {-5, 1 << 20, 3};
  const Bytes valid = ExampleBuilder()
                          .add_bytes("x", payload)
                          .add_floats("y", floats)
                          .add_int64s("shape", ints)
                          .encode();
  std::mt19937 gen(1234);
  int errors = 0, parsed = 0;
  for (int i = 0; i < 5000; ++i) {
    Bytes b = valid;
    const int flips = 1 + static_cast<int>(gen() % 3);
    for (int k = 0; k < flips; ++k) b[gen() % b.size()] = static_cast<std::byte>(gen() & 0xff);
    if (gen() % 4 == 0) b.resize(gen() % b.size());
    try {
      const ExampleView v = ExampleView::parse(b, "fuzz");
      for (const auto& name : v.names()) {
        const ExampleFeature* f = v.find(name);
        ASSERT_NE(f, nullptr);
        for (const auto& s : f->bytes) {
          ASSERT_GE(s.data(), b.data());
          ASSERT_LE(s.data() + s.size(), b.data() + b.size());
        }
      }
      ++parsed;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::input);
      ++errors;
    }
  }
  EXPECT_GT(errors, 0);
  EXPECT_GT(parsed, 0);
  // Entirely random buffers too.
  for (int i = 0; i < 2000; ++i) {
    Bytes b(gen() % 64);
    for (auto& x : b) x = static_cast<std::byte>(gen() & 0xff);
    try {
      (void)ExampleView::parse(b, "random");
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::input);
    }
  }
}

}  // namespace
}  // namespace crest
