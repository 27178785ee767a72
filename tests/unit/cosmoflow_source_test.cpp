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
#include "crest/data/formats/npy.hpp"
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

// A spatial split's block of every sample (block_of_samples): from npy files only the block's
// bytes are read, from a GZIP TFRecord the whole record; both decode the values of the whole
// sample's box, and the targets whole. A block that does not fit the samples is refused.
TEST(CosmoflowSource, ABlockOfEachSampleIsTheWholeSamplesBox) {
  test::TempDir t;
  std::filesystem::create_directories(t.file("tf"));
  std::filesystem::create_directories(t.file("npy"));
  const Shape shape{6, 5, 4, 2};
  std::vector<int16_t> x(static_cast<size_t>(shape.numel()));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<int16_t>(i * 13 % 700);
  write_sample(t.file("tf/a.tfrecord"), x, {0.5f, -0.25f});
  write_npy(t.file("npy/a.data.npy"), DType::i16, shape.to_vector(), x.data());
  const std::vector<float> y{0.5f, -0.25f};
  write_npy(t.file("npy/a.label.npy"), DType::f32, {2}, y.data());
  const SampleBlock block{{2, 0, 1}, {5, 5, 3}};  // rows 2-4, all 5, columns 1-2
  for (const bool npy : {true, false}) {
    SCOPED_TRACE(npy ? "npy" : "tfrecord");
    CosmoflowSourceOptions o;
    o.dir = t.file(npy ? "npy" : "tf");
    o.format = npy ? CosmoflowFileFormat::npy : CosmoflowFileFormat::tfrecord;
    o.gzip = !npy;
    o.sample_shape = shape;
    o.targets = 2;
    o.apply_log = true;
    const auto whole = open_cosmoflow_source(o);
    const auto part = block_of_samples(whole, block);
    EXPECT_EQ(part->spec().x_shape, (Shape{3, 5, 2, 2}));
    EXPECT_EQ(part->reads_blocks(), npy);
    std::vector<std::byte> payload;
    part->read(0, payload);
    if (npy) {
      EXPECT_EQ(payload.size(), 3u * 5 * 2 * 2 * 2 + 2 * 4);  // the block's int16s, y
    }
    std::vector<float> xs(static_cast<size_t>(part->spec().x_shape.numel())), ys(2);
    part->decode(0, payload, xs.data(), ys.data());
    size_t k = 0;
    for (int64_t d = 2; d < 5; ++d)
      for (int64_t h = 0; h < 5; ++h)
        for (int64_t w = 1; w < 3; ++w)
          for (int64_t c = 0; c < 2; ++c)
            ASSERT_EQ(xs[k++], static_cast<float>(std::log1p(
                                   static_cast<double>(x[size_t(((d * 5 + h) * 4 + w) * 2 + c)]))));
    EXPECT_EQ(ys, y);
    EXPECT_THROW(block_of_samples(whole, SampleBlock{{0, 0, 0}, {7, 5, 4}}), Error);
    EXPECT_THROW(block_of_samples(whole, SampleBlock{{0, 0}, {6, 5}}), Error);
  }
}

}  // namespace
}  // namespace crest
