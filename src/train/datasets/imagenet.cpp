// data.name: imagenet — ImageNet in either layout people have it in:
//  - format: jpeg (the default), JPEG folders as torchvision's ImageFolder reads them:
//    <data_dir>/train/<class>/<image>.jpg and <data_dir>/validation/ (or val/) alike, one int32
//    class label per sample (the class directory's index in sorted order;
//    crest/data/datasets/image_folder_source.hpp);
//  - format: tfrecord, TensorFlow's shards <data_dir>/train-NNNNN-of-MMMMM and validation-...,
//    records with image/encoded and a 1-based image/class/label
//    (crest/data/datasets/image_tfrecord_source.hpp).
// Training samples get RandomResizedCrop and a horizontal flip, validation samples the resize and
// centre crop, both normalised with ImageNet's mean and standard deviation.
#include <cmath>
#include <filesystem>

#include "config/text.hpp"
#include "crest/data/datasets/image_folder_source.hpp"
#include "crest/data/datasets/image_tfrecord_source.hpp"
#include "crest/train/dataset_registry.hpp"
#include "datasets/sample_checks.hpp"

namespace crest {
namespace {

using config::list_text;

void check(const DataSection& r, DataConfig& d) {
  if (d.data_dir.empty())
    r.fail("data_dir",
           "required for data.name: imagenet (the directory holding train/<class>/ "
           "and validation/<class>/ of JPEG images)");
  if (d.compression != Compression::none)
    r.fail("compression", "applies to CosmoFlow TFRecords; JPEG images are compressed already");
  if (d.apply_log) r.fail("apply_log", "applies to CosmoFlow; images are normalised per channel");
  // The key's default (tfrecord) is what an unset format holds: the folders, jpeg.
  if (!r.has("format")) d.format = SampleFileFormat::jpeg;
  if (d.format != SampleFileFormat::jpeg && d.format != SampleFileFormat::tfrecord)
    r.fail("format",
           "ImageNet is jpeg (class folders of JPEG files) or tfrecord "
           "(TensorFlow's train-NNNNN-of-MMMMM shards), not " +
               enum_name(d.format));
  if (d.sample_shape.rank() == 0) d.sample_shape = Shape{224, 224, 3};
  datasets::check_sample_shape(r, d, 3, "[H, W, C]");
  const Shape& s = d.sample_shape;
  if (s[0] != s[1] || s[2] != 3 || s[0] < 8 || s[0] > 4096)
    r.fail("sample_shape",
           "an image crop is [S, S, 3] with S in [8, 4096] (RGB, square, as "
           "RandomResizedCrop and CenterCrop give), got " +
               list_text(s.to_vector()));
  if (!r.has("n_train")) d.n_train = kEverySample;
  if (!r.has("n_valid")) d.n_valid = kEverySample;
}

int64_t file_limit(int64_t configured) { return configured == kEverySample ? 0 : configured; }

// The split's transform: torchvision's ImageNet recipe, the validation resize 256 / 224 of the
// crop (256 for 224).
ImageTransformOptions transform_options(const DataConfig& dc, bool train) {
  ImageTransformOptions t;
  t.train = train;
  t.reduced_decode = dc.reduced_decode;
  t.size = dc.sample_shape[0];
  t.resize =
      static_cast<int64_t>(std::lround(static_cast<double>(dc.sample_shape[0]) * 256.0 / 224.0));
  return t;
}

ImageFolderOptions folder_options(const DataConfig& dc, const std::string& dir, bool train,
                                  int64_t limit) {
  ImageFolderOptions o;
  o.dir = dir;
  o.limit = limit;
  o.transform = transform_options(dc, train);
  return o;
}

std::shared_ptr<SampleSource> open_shards(const DataConfig& dc, const std::string& root,
                                          const std::string& split, int64_t limit) {
  ImageTfRecordOptions o;
  o.dir = root;
  o.split = split;
  o.limit = limit;
  o.transform = transform_options(dc, split == "train");
  return open_image_tfrecords(o);
}

// <root>/validation, or torchvision's <root>/val.
std::string validation_dir(const std::string& root) {
  std::error_code ec;
  std::string val = root + "/val";
  if (!std::filesystem::exists(root + "/validation", ec) && std::filesystem::exists(val, ec))
    return val;
  return root + "/validation";
}

SplitSources open_splits(const DataConfig& dc, const std::string& root) {
  SplitSources s;
  if (dc.format == SampleFileFormat::tfrecord) {
    s.train = open_shards(dc, root, "train", file_limit(dc.n_train));
    if (dc.n_valid != 0) s.valid = open_shards(dc, root, "validation", file_limit(dc.n_valid));
    return s;
  }
  s.train = open_image_folder(folder_options(dc, root + "/train", true, file_limit(dc.n_train)));
  if (dc.n_valid != 0)
    s.valid =
        open_image_folder(folder_options(dc, validation_dir(root), false, file_limit(dc.n_valid)));
  return s;
}

DatasetType imagenet_dataset() {
  DatasetType t;
  t.name = "imagenet";
  t.sample_dims = "[H, W, C]";
  t.labels = true;
  t.one_label_per_sample = true;
  t.keys = {"reduced_decode"};
  t.validates_every_sample = true;
  t.default_metrics = {"top1_accuracy", "top5_accuracy"};
  t.check = check;
  t.open_splits = open_splits;
  // crest predict: a directory of class folders (or of validation shards), transformed as
  // validation images.
  t.open_directory = [](const DataConfig& dc, const std::string& dir) {
    if (dc.format == SampleFileFormat::tfrecord) return open_shards(dc, dir, "validation", 0);
    return open_image_folder(folder_options(dc, dir, false, 0));
  };
  return t;
}

}  // namespace

CREST_REGISTER_DATASET(imagenet, imagenet_dataset());

}  // namespace crest
