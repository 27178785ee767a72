// DeepCAM sample sources: the reference's HDF5 split (every .h5, sorted) and NVIDIA's numpy
// layouts (data-/label- pairs, fused datalabel-), the channel selection, the reference's float32
// min-max normalisation, int32 labels, and errors that name the file.
#include "crest/data/datasets/deepcam_source.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "crest/data/formats/npy.hpp"
#include "unit/data_formats_test_util.hpp"

namespace crest {
namespace {

using test::expect_input_error;
using test::ScratchDir;

constexpr DeepcamSampleShape kShape{2, 3, 4};  // H, W, C
constexpr int64_t kPixels = 6;

// Sample `id`: channel c of pixel p holds 10 c + p + id; labels cycle 0, 1, 2.
std::vector<float> sample_data(int id) {
  std::vector<float> d(kPixels * 4);
  for (int64_t p = 0; p < kPixels; ++p)
    for (int64_t c = 0; c < 4; ++c)
      d[static_cast<size_t>(p * 4 + c)] = static_cast<float>(10 * c + p + id);
  return d;
}
std::vector<float> sample_labels() { return {0, 1, 2, 0, 1, 2}; }

DeepcamStats stats() {
  DeepcamStats s;
  s.count = 2;
  s.minval = {0.f, 10.f, 20.f, 30.f};
  s.maxval = {7.f, 17.3f, 21.f, 40.f};
  s.mean = s.sqmean = {0, 0, 0, 0};
  return s;
}

DeepcamSourceOptions options(const std::string& dir, DeepcamFileFormat format) {
  DeepcamSourceOptions o;
  o.dir = dir;
  o.format = format;
  o.shape = kShape;
  o.stats = stats();
  o.stats_path = dir + "/../stats.h5";
  return o;
}

struct Decoded {
  std::vector<float> x;
  std::vector<int32_t> y;
};

Decoded decode(const SampleSource& s, int64_t i) {
  std::vector<std::byte> payload;
  s.read(i, payload);
  Decoded d;
  d.x.resize(static_cast<size_t>(s.spec().x_shape.numel()));
  d.y.resize(static_cast<size_t>(s.spec().y_shape.numel()));
  s.decode(i, payload, d.x.data(), d.y.data());
  return d;
}

// The reference's arithmetic: scale = 1 / (maxval - minval) in float32, x' = scale (x - minval).
float normalised(float x, size_t c) {
  const DeepcamStats s = stats();
  const float scale = 1.0f / (s.maxval[c] - s.minval[c]);
  return scale * (x - s.minval[c]);
}

TEST(DeepcamSource, ReadsEveryH5FileSortedNormalisedWithInt32Labels) {
  ScratchDir dir;
  // Names the reference's glob takes: any *.h5, sorted (not only data-*).
  write_deepcam_sample(dir.file("b-2016.h5"), kShape, sample_data(1).data(),
                       sample_labels().data());
  write_deepcam_sample(dir.file("a-2015.h5"), kShape, sample_data(0).data(),
                       sample_labels().data());
  auto src = open_deepcam_source(options(dir.file(""), DeepcamFileFormat::hdf5));
  ASSERT_EQ(src->size(), 2);
  EXPECT_EQ(std::filesystem::path(src->path(0)).filename(), "a-2015.h5");
  EXPECT_EQ(src->format(), "deepcam-hdf5");
  EXPECT_EQ(src->spec().x_shape, (Shape{2, 3, 4}));
  EXPECT_EQ(src->spec().y_shape, (Shape{2, 3}));
  EXPECT_TRUE(src->spec().y_integer);
  const Decoded d = decode(*src, 1);
  const std::vector<float> raw = sample_data(1);
  for (size_t i = 0; i < raw.size(); ++i) EXPECT_EQ(d.x[i], normalised(raw[i], i % 4)) << i;
  EXPECT_EQ(d.y, (std::vector<int32_t>{0, 1, 2, 0, 1, 2}));
}

TEST(DeepcamSource, SelectsChannelsInTheGivenOrder) {
  ScratchDir dir;
  write_deepcam_sample(dir.file("s.h5"), kShape, sample_data(0).data(), sample_labels().data());
  DeepcamSourceOptions o = options(dir.file(""), DeepcamFileFormat::hdf5);
  o.channels = {3, 1};
  auto src = open_deepcam_source(o);
  EXPECT_EQ(src->spec().x_shape, (Shape{2, 3, 2}));
  const Decoded d = decode(*src, 0);
  const std::vector<float> raw = sample_data(0);
  for (size_t p = 0; p < kPixels; ++p) {
    EXPECT_EQ(d.x[p * 2], normalised(raw[p * 4 + 3], 3)) << p;
    EXPECT_EQ(d.x[p * 2 + 1], normalised(raw[p * 4 + 1], 1)) << p;
  }
}

TEST(DeepcamSource, ReadsNvidiaNumpyPairsWithAnyIntegerOrFloatLabels) {
  ScratchDir dir;
  const std::vector<float> data = sample_data(0);
  write_npy(dir.file("data-000.npy"), DType::f32, {2, 3, 4}, data.data());
  const std::vector<int64_t> labels{2, 1, 0, 2, 1, 0};
  write_npy(dir.file("label-000.npy"), NpyDType::i64, {2, 3}, labels.data());
  write_npy(dir.file("data-001.npy"), DType::f32, {2, 3, 4}, data.data());
  const std::vector<float> float_labels{1, 1, 1, 0, 0, 0};
  write_npy(dir.file("label-001.npy"), DType::f32, {2, 3}, float_labels.data());
  auto src = open_deepcam_source(options(dir.file(""), DeepcamFileFormat::npy));
  ASSERT_EQ(src->size(), 2);  // label-*.npy are not samples
  EXPECT_EQ(src->format(), "deepcam-npy");
  EXPECT_EQ(decode(*src, 0).y, (std::vector<int32_t>{2, 1, 0, 2, 1, 0}));
  EXPECT_EQ(decode(*src, 1).y, (std::vector<int32_t>{1, 1, 1, 0, 0, 0}));
  EXPECT_EQ(decode(*src, 0).x[5], normalised(data[5], 1));
}

TEST(DeepcamSource, ReadsNvidiaFusedDatalabelFiles) {
  ScratchDir dir;
  const std::vector<float> data = sample_data(3), labels = sample_labels();
  std::vector<float> fused;
  for (size_t p = 0; p < kPixels; ++p) {
    fused.insert(fused.end(), data.begin() + static_cast<long>(p * 4),
                 data.begin() + static_cast<long>(p * 4 + 4));
    fused.push_back(labels[p]);
  }
  write_npy(dir.file("datalabel-000.npy"), DType::f32, {2, 3, 5}, fused.data());
  auto src = open_deepcam_source(options(dir.file(""), DeepcamFileFormat::npy));
  EXPECT_EQ(src->format(), "deepcam-npy-fused");
  const Decoded d = decode(*src, 0);
  for (size_t i = 0; i < data.size(); ++i) EXPECT_EQ(d.x[i], normalised(data[i], i % 4)) << i;
  EXPECT_EQ(d.y, (std::vector<int32_t>{0, 1, 2, 0, 1, 2}));
  // Both layouts in one split is ambiguous.
  write_npy(dir.file("data-000.npy"), DType::f32, {2, 3, 4}, data.data());
  expect_input_error([&] { open_deepcam_source(options(dir.file(""), DeepcamFileFormat::npy)); },
                     {"data-*.npy", "datalabel-*.npy", "one layout"});
}

TEST(DeepcamSource, LabelsOutsideTheClassesNameTheFile) {
  ScratchDir dir;
  const std::vector<float> labels{0, 1, 3, 0, 1, 2};
  write_deepcam_sample(dir.file("bad.h5"), kShape, sample_data(0).data(), labels.data());
  auto src = open_deepcam_source(options(dir.file(""), DeepcamFileFormat::hdf5));
  expect_input_error([&] { decode(*src, 0); },
                     {dir.file("bad.h5"), "label 3", "(0, 2)", "class id 0, 1 or 2"});
  ScratchDir npy;
  write_npy(npy.file("data-0.npy"), DType::f32, {2, 3, 4}, sample_data(0).data());
  const std::vector<float> half{0, 0.5f, 0, 0, 0, 0};
  write_npy(npy.file("label-0.npy"), DType::f32, {2, 3}, half.data());
  auto nsrc = open_deepcam_source(options(npy.file(""), DeepcamFileFormat::npy));
  expect_input_error([&] { decode(*nsrc, 0); }, {npy.file("label-0.npy"), "not a class id"});
}

// The decoded block of every sample equals the block of the decoded sample: HDF5 (a hyperslab)
// and data-/label- pairs read only the block's data; fused files are read whole. Channels
// selected out of order and the labels, which stay whole, included.
TEST(DeepcamSource, ABlockOfEachSampleIsTheWholeSamplesBlock) {
  ScratchDir h5, pairs, fused;
  write_deepcam_sample(h5.file("s.h5"), kShape, sample_data(3).data(), sample_labels().data());
  write_npy(pairs.file("data-0.npy"), DType::f32, {2, 3, 4}, sample_data(3).data());
  write_npy(pairs.file("label-0.npy"), DType::f32, {2, 3}, sample_labels().data());
  std::vector<float> fused_values;
  for (int64_t p = 0; p < kPixels; ++p) {
    for (int64_t c = 0; c < 4; ++c) fused_values.push_back(sample_data(3)[p * 4 + c]);
    fused_values.push_back(sample_labels()[static_cast<size_t>(p)]);
  }
  write_npy(fused.file("datalabel-0.npy"), DType::f32, {2, 3, 5}, fused_values.data());
  const SampleBlock block{{1, 1}, {2, 3}};  // row 1, columns 1..2
  const std::vector<std::tuple<std::string, DeepcamFileFormat, bool>> layouts{
      {h5.file(""), DeepcamFileFormat::hdf5, true},
      {pairs.file(""), DeepcamFileFormat::npy, true},
      {fused.file(""), DeepcamFileFormat::npy, false}};
  for (const auto& [dir, format, reads_blocks] : layouts) {
    SCOPED_TRACE(dir);
    DeepcamSourceOptions o = options(dir, format);
    o.channels = {3, 0, 2};
    const auto whole = open_deepcam_source(o);
    EXPECT_EQ(whole->reads_blocks(), reads_blocks);
    const Decoded all = decode(*whole, 0);
    const auto part = block_of_samples(whole, block);
    EXPECT_EQ(part->spec().x_shape, (Shape{1, 2, 3}));
    const Decoded got = decode(*part, 0);
    std::vector<float> want;
    for (int64_t w = 1; w < 3; ++w)
      for (size_t c = 0; c < 3; ++c) want.push_back(all.x[static_cast<size_t>(3 + w) * 3 + c]);
    EXPECT_EQ(got.x, want);
    EXPECT_EQ(got.y, all.y) << "the labels stay whole";
  }
}

TEST(DeepcamSource, AWrongShapeOrStatisticsFailAtOpenNamingTheFile) {
  ScratchDir dir;
  write_deepcam_sample(dir.file("s.h5"), {2, 3, 5}, std::vector<float>(30).data(),
                       sample_labels().data());
  expect_input_error([&] { open_deepcam_source(options(dir.file(""), DeepcamFileFormat::hdf5)); },
                     {dir.file("s.h5"), "data.sample_shape"});
  ScratchDir good;
  write_deepcam_sample(good.file("s.h5"), kShape, sample_data(0).data(), sample_labels().data());
  DeepcamSourceOptions o = options(good.file(""), DeepcamFileFormat::hdf5);
  o.stats.maxval[2] = o.stats.minval[2];  // a constant channel cannot be normalised
  expect_input_error([&] { open_deepcam_source(o); }, {"stats.h5", "channel 2", "maxval"});
  o = options(good.file(""), DeepcamFileFormat::hdf5);
  o.stats.minval.pop_back();
  expect_input_error([&] { open_deepcam_source(o); }, {"stats.h5", "3 channels"});
  o = options(good.file(""), DeepcamFileFormat::hdf5);
  o.channels = {4};
  expect_input_error([&] { open_deepcam_source(o); }, {"channel 4"});
  o = options(good.file(""), DeepcamFileFormat::hdf5);
  o.limit = 3;
  expect_input_error([&] { open_deepcam_source(o); }, {"holds 1 sample files but 3"});
}

}  // namespace
}  // namespace crest
