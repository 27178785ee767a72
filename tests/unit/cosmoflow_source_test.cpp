// CosmoFlow sample decoding: int16 counts become float32 exactly as the reference's
// preprocessing (cast, then ln(x + 1) with apply_log), targets pass through, and a file whose
// volume does not match data.sample_shape is refused by name.
#include "crest/data/datasets/cosmoflow_source.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <vector>

#include "crest/core/error.hpp"
#include "crest/data/formats/example.hpp"
#include "crest/data/formats/tfrecord.hpp"
#include "support/cli_util.hpp"

namespace crest {
namespace {

void write_sample(const std::string& path, const std::vector<int16_t>& x,
                  const std::vector<float>& y) {
  ExampleBuilder ex;
  ex.add_bytes("x", std::as_bytes(std::span<const int16_t>(x)));
  ex.add_floats("y", y);
  TfRecordWriter w(path, TfRecordCompression::gzip);
  w.write(ex.encode());
  w.close();
}

TEST(CosmoflowSource, DecodesCountsWithLog1pAndTargets) {
  test::TempDir t;
  std::filesystem::create_directories(t.file("train"));
  std::vector<int16_t> x(4 * 4 * 4 * 2);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<int16_t>(i * 37 % 500);
  x[3] = 32767;
  write_sample(t.file("train/a.tfrecord"), x, {0.5f, -0.25f});
  CosmoflowSourceOptions o;
  o.dir = t.file("train");
  o.gzip = true;
  o.sample_shape = Shape{4, 4, 4, 2};
  o.targets = 2;
  for (bool log : {false, true}) {
    o.apply_log = log;
    auto src = open_cosmoflow_source(o);
    ASSERT_EQ(src->size(), 1);
    std::vector<std::byte> payload;
    src->read(0, payload);
    std::vector<float> xs(x.size()), ys(2);
    src->decode(0, payload, xs.data(), ys.data());
    for (size_t i = 0; i < x.size(); ++i)
      EXPECT_EQ(xs[i], log ? static_cast<float>(std::log1p(static_cast<double>(x[i])))
                           : static_cast<float>(x[i]))
          << i;
    EXPECT_EQ(ys[0], 0.5f);
    EXPECT_EQ(ys[1], -0.25f);
  }
  // The wrong shape is named with the file and the expected size.
  o.sample_shape = Shape{8, 8, 8, 2};
  auto src = open_cosmoflow_source(o);
  std::vector<std::byte> payload;
  src->read(0, payload);
  std::vector<float> xs(8 * 8 * 8 * 2), ys(2);
  try {
    src->decode(0, payload, xs.data(), ys.data());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a.tfrecord: feature 'x' is 256 bytes, expected 2048"),
              std::string::npos)
        << e.what();
  }
  // An empty directory is an error naming it.
  std::filesystem::create_directories(t.file("empty"));
  o.dir = t.file("empty");
  EXPECT_THROW(open_cosmoflow_source(o), Error);
}

}  // namespace
}  // namespace crest
