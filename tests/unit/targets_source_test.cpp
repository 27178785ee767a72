// The targets alone (crest/data/sample_source.hpp targets_of_samples), what a pipeline's last
// stage reads: every format gives the targets the whole sample's decode gives, with no sample
// bytes in the batch; an image folder reads no file at all, CosmoFlow npy its label file alone, a
// TFRecord its record (its volume's size still checked, its JPEG or volume not decoded); the
// default decodes the whole sample, draws included; and a loader over it fills the batches'
// targets as the whole loader does.
#include <gtest/gtest.h>

#include <cstring>
#include <sstream>
#include <vector>

#include "crest/core/error.hpp"
#include "crest/data/datagen.hpp"
#include "crest/data/datasets/cosmoflow_source.hpp"
#include "crest/data/datasets/deepcam_source.hpp"
#include "crest/data/datasets/image_folder_source.hpp"
#include "crest/data/datasets/image_tfrecord_source.hpp"
#include "crest/data/dummy_dataset.hpp"
#include "crest/data/formats/example.hpp"
#include "crest/data/formats/hdf5.hpp"
#include "crest/data/formats/tfrecord.hpp"
#include "crest/data/loader.hpp"
#include "support/cli_util.hpp"
#include "support/fake_communicator.hpp"

namespace crest {
namespace {

std::string generate(const test::TempDir& d, const std::string& family, const std::string& format,
                     int64_t size, bool fused = false) {
  DatagenOptions o;
  o.family = family;
  o.format = format;
  o.fused = fused;
  o.height = 16;
  o.width = 32;
  o.out = d.file(family + format + (fused ? "fused" : ""));
  o.n_train = 12;
  o.n_valid = 2;
  o.size = size;
  o.seed = 3;
  o.threads = 1;
  std::ostringstream log;
  generate_dataset(o, log);
  return o.out;
}

// Sample i's targets as bytes, through `source`'s read and decode with `draw`.
std::vector<std::byte> targets(const SampleSource& source, int64_t i, const SampleDraw& draw,
                               size_t* payload_bytes = nullptr) {
  std::vector<std::byte> payload;
  source.read(i, payload);
  if (payload_bytes) *payload_bytes = payload.size();
  std::vector<float> x(static_cast<size_t>(source.spec().x_shape.numel()) + 1);
  std::vector<std::byte> y(source.spec().y_bytes());
  source.decode_drawn(i, payload, x.data(), y.data(), draw);
  return y;
}

// The targets-only source of `whole` gives every sample's targets, with no sample bytes.
void expect_the_same_targets(const std::shared_ptr<const SampleSource>& whole, bool reads_alone) {
  const auto only = targets_of_samples(whole);
  EXPECT_EQ(only->spec().x_shape, Shape{0});
  EXPECT_EQ(only->spec().x_bytes(), 0u);
  EXPECT_EQ(only->spec().y_shape, whole->spec().y_shape);
  EXPECT_EQ(only->size(), whole->size());
  EXPECT_EQ(only->format(), whole->format());
  EXPECT_EQ(only->reads_targets_alone(), reads_alone);
  const SampleDraw draw{.seed = 4, .epoch = 1};
  for (int64_t i = 0; i < whole->size(); ++i)
    EXPECT_EQ(targets(*only, i, draw), targets(*whole, i, draw)) << whole->format() << " " << i;
}

ImageTransformOptions transform() {
  ImageTransformOptions t;
  t.train = true;
  t.size = 16;
  t.resize = 18;
  return t;
}

TEST(TargetsSource, ImagesGiveTheirLabelsAndAFolderReadsNoFile) {
  const test::TempDir d;
  const std::string set = generate(d, "imagenet", "", 24);
  ImageFolderOptions fo;
  fo.dir = set + "/train";
  fo.transform = transform();
  const auto folder = open_image_folder(fo);
  expect_the_same_targets(folder, true);
  size_t bytes = 1;
  targets(*targets_of_samples(folder), 3, {}, &bytes);
  EXPECT_EQ(bytes, 0u) << "the folder's labels are its class directories";
  const auto shards = open_image_tfrecords(
      {.dir = set, .split = "train", .limit = 0, .first_label = 1, .transform = transform()});
  expect_the_same_targets(shards, false);
}

TEST(TargetsSource, CosmoflowNpyReadsTheLabelFileAlone) {
  const test::TempDir d;
  for (const std::string format : {"npy", "tfrecord"}) {
    SCOPED_TRACE(format);
    CosmoflowSourceOptions o;
    o.dir = generate(d, "cosmoflow", format, 32) + "/train";
    o.format = format == "npy" ? CosmoflowFileFormat::npy : CosmoflowFileFormat::tfrecord;
    o.sample_shape = Shape{32, 32, 32, 4};
    o.targets = 4;
    o.apply_log = true;
    const auto whole = open_cosmoflow_source(o);
    expect_the_same_targets(whole, format == "npy");
    size_t bytes = 0;
    targets(*targets_of_samples(whole), 0, {}, &bytes);
    if (format == "npy")
      EXPECT_EQ(bytes, 4u * 4) << "the four float32 targets";
    else
      EXPECT_GT(bytes, size_t{32} * 32 * 32 * 4 * 2) << "the whole record";
  }
}

// DeepCAM reads the label map alone where its files keep it apart (HDF5, data-/label- npy pairs);
// a fused datalabel-*.npy is read and decoded whole.
TEST(TargetsSource, DeepcamReadsTheLabelsAloneWhereTheFilesKeepThemApart) {
  const test::TempDir d;
  const struct {
    std::string format;
    bool fused;
    DeepcamFileFormat file_format;
  } sets[] = {{"hdf5", false, DeepcamFileFormat::hdf5},
              {"npy", false, DeepcamFileFormat::npy},
              {"npy", true, DeepcamFileFormat::npy}};
  for (const auto& set : sets) {
    SCOPED_TRACE(set.format + (set.fused ? " fused" : ""));
    const std::string dir = generate(d, "deepcam", set.format, 0, set.fused);
    DeepcamSourceOptions o;
    o.dir = dir + "/train";
    o.format = set.file_format;
    o.shape = {16, 32, 16};
    o.stats = read_deepcam_stats(dir + "/stats.h5");
    o.stats_path = dir + "/stats.h5";
    o.channels = {0, 3, 5};
    const auto whole = open_deepcam_source(o);
    expect_the_same_targets(whole, !set.fused);
    size_t bytes = 0;
    targets(*targets_of_samples(whole), 1, {}, &bytes);
    if (!set.fused) {
      EXPECT_EQ(bytes, size_t{16} * 32 * 4) << "the int32 label map alone";
    }
  }
}

// A record whose volume has another size is refused by the targets' decode too: the first stage
// would refuse it, and both stages must agree on which samples are bad (data.on_error: skip).
TEST(TargetsSource, ARecordWithAVolumeOfAnotherSizeIsRefusedNamingTheFile) {
  const test::TempDir d;
  ExampleBuilder ex;
  const std::vector<int16_t> x(10);
  ex.add_bytes("x", std::as_bytes(std::span<const int16_t>(x)));
  const std::vector<float> y{1.f, 2.f, 3.f, 4.f};
  ex.add_floats("y", y);
  std::filesystem::create_directories(d.file("bad"));
  TfRecordWriter w(d.file("bad/a.tfrecord"), TfRecordCompression::none);
  w.write(ex.encode());
  w.close();
  CosmoflowSourceOptions o;
  o.dir = d.file("bad");
  o.sample_shape = Shape{4, 4, 4, 4};
  o.targets = 4;
  const auto only = targets_of_samples(open_cosmoflow_source(o));
  try {
    targets(*only, 0, {});
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a.tfrecord: feature 'x' is 20 bytes"), std::string::npos)
        << e.what();
  }
}

// A source without a targets-only path (the default: here the dummy set) decodes the whole sample
// and keeps its targets; a loader over the targets fills the batches' targets as the whole
// loader does, with no sample bytes.
TEST(TargetsSource, TheDefaultDecodesTheWholeSampleAndALoaderFillsTheTargets) {
  const auto whole = make_dummy_source(Shape{4, 4, 4, 2}, 3, 10, 7);
  expect_the_same_targets(whole, false);
  test::FakeCommunicator comm(0, 1);
  LoaderOptions lo;
  lo.batch_size = 4;
  lo.seed = 11;
  lo.threads = 2;
  lo.every_sample = true;  // the last batch has empty places
  DataLoader all(whole, lo, comm), only(targets_of_samples(whole), lo, comm);
  for (int epoch = 0; epoch < 2; ++epoch) {
    all.start_epoch(epoch);
    only.start_epoch(epoch);
    for (int64_t b = 0; b < all.plan().batches; ++b) {
      const LoadedBatch x = all.next(), y = only.next();
      EXPECT_EQ(y.sample.numel(), 0);
      EXPECT_EQ(y.sample.shape()[0], 4);
      ASSERT_EQ(y.target.bytes(), x.target.bytes());
      EXPECT_EQ(std::memcmp(y.target.data(), x.target.data(), x.target.bytes()), 0) << b;
      EXPECT_EQ(std::vector<int64_t>(y.sample_ids.begin(), y.sample_ids.end()),
                std::vector<int64_t>(x.sample_ids.begin(), x.sample_ids.end()));
      all.release(x);
      only.release(y);
    }
  }
}

}  // namespace
}  // namespace crest
