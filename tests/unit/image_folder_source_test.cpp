// ImageNet-style folders (crest/data/datasets/image_folder_source.hpp): torchvision's ImageFolder
// order and labels, the validation transform, training draws that are a function of (seed,
// epoch, sample), reduced-scale decoding close to the full decode, and the folders and files it
// refuses by name.
#include "crest/data/datasets/image_folder_source.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "crest/core/error.hpp"
#include "crest/data/image_transforms.hpp"
#include "support/drawn_sample.hpp"

namespace crest {
namespace {

namespace fs = std::filesystem;

// A smooth picture whose colour depends on `seed`: JPEG codes it well.
RgbImage picture(int64_t height, int64_t width, int seed) {
  RgbImage p;
  p.height = height;
  p.width = width;
  for (int64_t r = 0; r < height; ++r)
    for (int64_t c = 0; c < width; ++c)
      for (int k = 0; k < 3; ++k)
        p.pixels.push_back(
            static_cast<uint8_t>((r * (k + 1) + c * (3 - k) + int64_t{seed} * 40) % 200));
  return p;
}

void write(const fs::path& path, const std::vector<std::byte>& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// <tmp>/folder: classes "cat" (3 images) and "ant" (2), a README beside the images.
struct Folder {
  // One folder per test and process: ctest runs the cases of this suite in parallel.
  fs::path root =
      fs::temp_directory_path() / ("crest_image_folder_" + std::to_string(::getpid()) + "_" +
                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
  Folder() {
    fs::remove_all(root);
    for (int i = 0; i < 3; ++i)
      write(root / "cat" / ("img" + std::to_string(2 - i) + ".JPG"),
            encode_jpeg(picture(40 + 10 * i, 60, i), 90));
    for (int i = 0; i < 2; ++i)
      write(root / "ant" / ("a" + std::to_string(i) + ".jpeg"),
            encode_jpeg(picture(64, 48 + 16 * i, 5 + i), 90));
    write(root / "ant" / "README.txt", {std::byte{'h'}});
  }
  ~Folder() { fs::remove_all(root); }
  ImageFolderOptions options(bool train, int64_t size = 32) const {
    ImageFolderOptions o;
    o.dir = root.string();
    o.transform.train = train;
    o.transform.size = size;
    o.transform.resize = size + size / 7;
    return o;
  }
};

using test::drawn_sample;

TEST(ImageFolderSource, ListsClassesSortedAndImagesInClassOrder) {
  const Folder f;
  EXPECT_EQ(image_folder_classes(f.root.string()), (std::vector<std::string>{"ant", "cat"}));
  const auto s = open_image_folder(f.options(false));
  ASSERT_EQ(s->size(), 5);
  EXPECT_EQ(fs::path(s->path(0)).filename(), "a0.jpeg");
  EXPECT_EQ(fs::path(s->path(2)).filename(), "img0.JPG");
  EXPECT_EQ(s->spec().x_shape, Shape({32, 32, 3}));
  EXPECT_EQ(s->spec().y_shape.rank(), 0);
  EXPECT_TRUE(s->spec().y_integer);
  int32_t label = -1;
  drawn_sample(*s, 1, {}, &label);
  EXPECT_EQ(label, 0);
  drawn_sample(*s, 4, {}, &label);
  EXPECT_EQ(label, 1);
  ImageFolderOptions limited = f.options(false);
  limited.limit = 3;
  EXPECT_EQ(open_image_folder(limited)->size(), 3);
}

TEST(ImageFolderSource, ValidationIsTheResizedCentreCrop) {
  const Folder f;
  const ImageFolderOptions o = f.options(false);
  const auto s = open_image_folder(o);
  std::vector<std::byte> payload;
  s->read(3, payload);
  std::vector<float> want(size_t{32} * 32 * 3);
  transform_image(decode_jpeg(payload, "x"), o.transform, 0, want.data());
  int32_t label = 0;
  EXPECT_EQ(drawn_sample(*s, 3, {7, 3}, &label), want);  // no draw: the same for any epoch
}

TEST(ImageFolderSource, TrainingDrawsDependOnSeedEpochAndSampleOnly) {
  const Folder f;
  const auto s = open_image_folder(f.options(true));
  int32_t label = 0;
  const std::vector<float> a = drawn_sample(*s, 2, {11, 4}, &label);
  EXPECT_EQ(drawn_sample(*s, 2, {11, 4}, &label), a);
  EXPECT_NE(drawn_sample(*s, 2, {11, 5}, &label), a);
  EXPECT_NE(drawn_sample(*s, 2, {12, 4}, &label), a);
  for (float v : a) ASSERT_TRUE(std::isfinite(v));
}

TEST(ImageFolderSource, ReducedDecodingStaysCloseToTheFullDecode) {
  const fs::path big =
      fs::temp_directory_path() / ("crest_image_folder_big_" + std::to_string(::getpid()));
  fs::remove_all(big);
  RgbImage smooth;  // a photograph's smoothness: waves tens of pixels long
  smooth.height = 480;
  smooth.width = 640;
  for (int64_t r = 0; r < smooth.height; ++r)
    for (int64_t c = 0; c < smooth.width; ++c)
      for (int k = 0; k < 3; ++k)
        smooth.pixels.push_back(
            static_cast<uint8_t>(128 + 60 * std::sin(static_cast<double>(r) / 37 + k) +
                                 50 * std::cos(static_cast<double>(c) / 53 - k)));
  write(big / "c" / "big.jpg", encode_jpeg(smooth, 95));
  ImageFolderOptions o;
  o.dir = big.string();
  o.transform.size = 24;
  o.transform.scale_lo = 0.9;  // a large crop: libjpeg can decode at a quarter of the size
  const auto full = open_image_folder(o);
  o.transform.reduced_decode = true;
  const auto reduced = open_image_folder(o);
  int32_t label = 0;
  double differ = 0, count = 0;
  for (int e = 0; e < 4; ++e) {
    const std::vector<float> a = drawn_sample(*full, 0, {3, e}, &label);
    const std::vector<float> b = drawn_sample(*reduced, 0, {3, e}, &label);
    for (size_t i = 0; i < a.size(); ++i) differ += std::abs(a[i] - b[i]);
    count += static_cast<double>(a.size());
  }
  // In normalised units (1/255/0.225 = 0.017 per grey level): a few levels on average
  // (measured 0.076, about 4 levels: the crop's edges land up to a scaled pixel apart).
  EXPECT_LT(differ / count, 0.1);
  fs::remove_all(big);
}

TEST(ImageFolderSource, RefusesFoldersWithoutClassesOrImagesAndNamesABadFile) {
  const Folder f;
  EXPECT_THROW(image_folder_classes((f.root / "missing").string()), Error);
  fs::create_directories(f.root / "empty");
  try {
    open_image_folder(f.options(false));
    ADD_FAILURE() << "opened a folder with an empty class";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("empty: a class directory without JPEG images"),
              std::string::npos)
        << e.what();
  }
  fs::remove(f.root / "empty");
  write(f.root / "cat" / "img1.JPG", {std::byte{0xFF}, std::byte{0xD8}, std::byte{0xFF}});
  const auto s = open_image_folder(f.options(true));
  try {
    int32_t label = 0;
    drawn_sample(*s, 3, {}, &label);
    ADD_FAILURE() << "decoded a cut file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cat/img1.JPG: "), std::string::npos) << e.what();
  }
}

// A sliver (2 x 6000 pixels, a valid JPEG) resized to 256 on its shorter side would be 768 M
// pixels: refused by name before anything that large is allocated (found by fuzz_jpeg). The class
// names are the directories', in label order.
TEST(ImageFolderSource, RefusesASliverForTheValidationResizeByName) {
  const Folder f;
  EXPECT_EQ(open_image_folder(f.options(false))->class_names(),
            (std::vector<std::string>{"ant", "cat"}));
  write(f.root / "cat" / "img0.JPG", encode_jpeg(picture(2, 6000, 1), 90));
  ImageFolderOptions o = f.options(false, 224);
  o.transform.resize = 256;
  const auto s = open_image_folder(o);
  try {
    int32_t label = 0;
    drawn_sample(*s, 2, {}, &label);
    ADD_FAILURE() << "resized a sliver";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("cat/img0.JPG: an image of 2 x 6000 pixels resized to 256"), std::string::npos)
        << m;
    EXPECT_EQ(e.exit_code(), 2) << m;
  }
}

// A spatial split's block of a training image: the loader's draw reaches the whole image's crop
// and flip, so each rank's block is cut from the same drawn sample (not from epoch 0's).
TEST(ImageFolderSource, ABlockOfADrawnSampleIsCutFromThatDraw) {
  const Folder f;
  const auto whole = open_image_folder(f.options(true));
  const auto top = block_of_samples(whole, SampleBlock{{0, 0}, {16, 32}});
  for (const int64_t epoch : {0, 3}) {
    const SampleDraw draw{.seed = 4, .epoch = epoch};
    int32_t a = 0, b = 0;
    const std::vector<float> full = drawn_sample(*whole, 1, draw, &a);
    const std::vector<float> half = drawn_sample(*top, 1, draw, &b);
    ASSERT_EQ(half.size(), full.size() / 2);
    EXPECT_TRUE(std::equal(half.begin(), half.end(), full.begin())) << "epoch " << epoch;
    EXPECT_EQ(a, b);
  }
}

}  // namespace
}  // namespace crest
