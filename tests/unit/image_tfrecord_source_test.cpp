// ImageNet's TFRecord layout (crest/data/datasets/image_tfrecord_source.hpp) against the folder
// layout of the same images, both written by `crest datagen imagenet`: every record holds its
// file's bytes and decodes to the same pixels and label, training draws (keyed by the sample)
// and validation alike; and the shard sets and
// records it refuses by name (a missing shard, two sets, a label below the first class's).
#include "crest/data/datasets/image_tfrecord_source.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "crest/core/error.hpp"
#include "crest/data/datagen.hpp"
#include "crest/data/datasets/image_folder_source.hpp"
#include "crest/data/formats/example.hpp"
#include "crest/data/formats/tfrecord.hpp"
#include "support/cli_util.hpp"
#include "support/drawn_sample.hpp"

namespace crest {
namespace {

namespace fs = std::filesystem;

// 600 training images: three shards of 256, 256 and 88 records; 40 validation images: one.
std::string make_set(const test::TempDir& d) {
  DatagenOptions o;
  o.family = "imagenet";
  o.out = d.file("set");
  o.n_train = 600;
  o.n_valid = 40;
  o.size = 24;
  o.seed = 5;
  o.threads = 2;
  std::ostringstream log;
  generate_dataset(o, log);
  return o.out;
}

ImageTransformOptions transform(bool train) {
  ImageTransformOptions t;
  t.train = train;
  t.size = 16;
  t.resize = 18;
  return t;
}

using test::drawn_sample;

// The shards hold the images in index order; the folders class after class: image i of the
// shards is the folder's (i % 10)-th class's (i / 10)-th file.
int64_t folder_index(int64_t i, int64_t n) { return (i % 10) * (n / 10) + i / 10; }

TEST(ImageTfRecordSource, EverySampleEqualsTheFolderLayouts) {
  const test::TempDir d;
  const std::string set = make_set(d);
  EXPECT_EQ(image_tfrecord_shards(set, "train").size(), 3u);
  for (const bool train : {true, false}) {
    const std::string split = train ? "train" : "validation";
    const int64_t n = train ? 600 : 40;
    const auto shards = open_image_tfrecords(
        {.dir = set, .split = split, .limit = 0, .first_label = 1, .transform = transform(train)});
    ImageFolderOptions fo;
    fo.dir = set + "/" + split;
    fo.transform = transform(train);
    const auto folders = open_image_folder(fo);
    ASSERT_EQ(shards->size(), n);
    EXPECT_EQ(shards->format(), "imagenet-tfrecord");
    for (int64_t i = 0; i < n; i += train ? 7 : 1) {
      const int64_t j = folder_index(i, n);
      std::vector<std::byte> record, file;
      shards->read(i, record);
      folders->read(j, file);
      const ExampleView example = ExampleView::parse(record, "record");
      const auto& encoded = example.at("image/encoded", ExampleFeature::Kind::bytes).bytes[0];
      EXPECT_EQ(std::vector<std::byte>(encoded.begin(), encoded.end()), file)
          << "record " << i << " holds the file's bytes";
      // Sample i's draws are keyed by i in either layout: the folder's file decoded with them.
      const SampleDraw draw{.seed = 9, .epoch = 2};
      std::vector<float> want(size_t{16} * 16 * 3);
      decode_image_sample(file, "file", transform(train), image_draw_key(draw, i), want.data());
      int32_t label = -1;
      EXPECT_EQ(drawn_sample(*shards, i, draw, &label), want) << split << " " << i;
      EXPECT_EQ(label, i % 10);
      if (!train) {  // no draws: the very samples of the folder layout
        int32_t folder_label = -2;
        EXPECT_EQ(drawn_sample(*folders, j, draw, &folder_label), want);
        EXPECT_EQ(folder_label, label);
      }
    }
  }
  // A limit takes the first records, across shards.
  EXPECT_EQ(open_image_tfrecords({.dir = set,
                                  .split = "train",
                                  .limit = 300,
                                  .first_label = 1,
                                  .transform = transform(true)})
                ->size(),
            300);
}

TEST(ImageTfRecordSource, RefusesIncompleteShardSetsAndBadLabelsByName) {
  const test::TempDir d;
  const std::string set = make_set(d);
  fs::remove(set + "/train-00001-of-00003");
  try {
    image_tfrecord_shards(set, "train");
    ADD_FAILURE() << "a missing shard was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("train-00001-of-00003: missing (2 of 3 shards"),
              std::string::npos)
        << e.what();
  }
  fs::copy_file(set + "/train-00000-of-00003", set + "/train-00000-of-00004");
  EXPECT_THROW(image_tfrecord_shards(set, "train"), Error) << "two sets";
  EXPECT_THROW(image_tfrecord_shards(d.file("nothing"), "train"), Error);
  // A label 0 (the background class of TensorFlow's 1-based labels) in a one-record shard.
  const std::string odd = d.file("odd");
  fs::create_directories(odd);
  {
    std::vector<std::byte> jpeg(4, std::byte{0});
    const int64_t label = 0;
    ExampleBuilder b;
    b.add_bytes("image/encoded", jpeg).add_int64s("image/class/label", {&label, 1});
    TfRecordWriter w(odd + "/validation-00000-of-00001");
    w.write(b.encode());
    w.close();
  }
  const auto s = open_image_tfrecords({.dir = odd,
                                       .split = "validation",
                                       .limit = 0,
                                       .first_label = 1,
                                       .transform = transform(false)});
  try {
    int32_t label = 0;
    drawn_sample(*s, 0, {}, &label);
    ADD_FAILURE() << "label 0 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("validation-00000-of-00001: record 0: image/class/label 0"),
        std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace crest
