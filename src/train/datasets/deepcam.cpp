// data.name: deepcam — the DeepCAM reference's climate fields: <data_dir>/{train,validation}/ HDF5
// files (or NVIDIA's .npy variant) normalised with <data_dir>/stats.h5, each [H, W, C] with int32
// class labels [H, W]; the reference's argument names (data_dir_prefix, channels).
#include <filesystem>
#include <numeric>

#include "config/text.hpp"
#include "crest/data/datasets/deepcam_source.hpp"
#include "crest/train/dataset_registry.hpp"
#include "datasets/sample_checks.hpp"

namespace crest {
namespace {

using config::list_text;

// Keys of the CosmoFlow files that mean nothing for DeepCAM's, refused rather than ignored.
void refuse_cosmoflow_keys(const DataSection& r, const DataConfig& d) {
  if (d.compression != Compression::none)
    r.fail("compression", "applies to CosmoFlow TFRecords; DeepCAM files are not compressed");
  if (d.apply_log) r.fail("apply_log", "applies to CosmoFlow; DeepCAM data is min-max normalised");
  if ((d.format == SampleFileFormat::tfrecord && r.has("format")) ||
      d.format == SampleFileFormat::jpeg)
    r.fail("format", "DeepCAM samples are hdf5 (the reference) or npy (NVIDIA's), not " +
                         enum_name(d.format));
}

// The channels the model reads: every one by default, else each an index into the file's.
void check_channels(const DataSection& r, DataConfig& d) {
  const int64_t file_channels = d.sample_shape[2];
  if (!r.has("channels")) {
    d.channels.resize(static_cast<size_t>(file_channels));
    std::iota(d.channels.begin(), d.channels.end(), int64_t{0});
    return;
  }
  if (d.channels.empty()) r.fail("channels", "lists no channel (leave it out to read all)");
  for (size_t i = 0; i < d.channels.size(); ++i)
    if (d.channels[i] >= file_channels)
      r.fail_item("channels", i,
                  "channel " + std::to_string(d.channels[i]) + " does not exist: the samples " +
                      "have " + std::to_string(file_channels) + " (0 to " +
                      std::to_string(file_channels - 1) + ", data.sample_shape)");
}

// The reference's order reshuffles every epoch: unshuffled it would be no order the reference has.
void check_train_order(const DataSection& r, const DataConfig& d) {
  if (d.train_order != TrainOrder::reference || d.shuffle) return;
  const char* key = r.has("shuffle") ? "shuffle" : "shuffle_train";
  r.fail(key, std::string("false contradicts data.train_order: reference (the reference ") +
                  "reshuffles the training files every epoch); leave " + key +
                  " out, or use train_order: crest for sorted order");
}

void check(const DataSection& r, DataConfig& d) {
  if (d.data_dir.empty())
    r.fail("data_dir",
           "required for data.name: deepcam (the directory holding train/, validation/ and "
           "stats.h5; the reference's data_dir_prefix)");
  if (r.has("data_dir") && r.has("data_dir_prefix"))
    r.fail("data_dir_prefix", "is data_dir under the reference's name; give one");
  refuse_cosmoflow_keys(r, d);
  if (d.format == SampleFileFormat::tfrecord) d.format = SampleFileFormat::hdf5;
  if (d.sample_shape.rank() == 0) d.sample_shape = Shape{768, 1152, 16};  // the reference data
  datasets::check_sample_shape(r, d, 3, "[H, W, C]");
  if (d.sample_shape[0] % 16 || d.sample_shape[1] % 16)
    r.fail("sample_shape",
           "height and width must be multiples of 16 (DeepLabv3+'s output stride), got " +
               list_text(d.sample_shape.to_vector()));
  check_channels(r, d);
  check_train_order(r, d);
  if (!r.has("n_train")) d.n_train = kEverySample;
  if (!r.has("n_valid")) d.n_valid = kEverySample;
}

// A split's limit: 0 (every file) for kEverySample.
int64_t file_limit(int64_t configured) { return configured == kEverySample ? 0 : configured; }

// The normalisation statistics of the dataset at <root>: <root>/stats.h5.
DeepcamSourceOptions deepcam_options(const DataConfig& dc, const std::string& root) {
  DeepcamSourceOptions so;
  so.format = dc.format == SampleFileFormat::npy ? DeepcamFileFormat::npy : DeepcamFileFormat::hdf5;
  so.shape = {dc.sample_shape[0], dc.sample_shape[1], dc.sample_shape[2]};
  so.channels = dc.channels;
  so.stats_path = root + "/stats.h5";
  std::error_code ec;
  if (!std::filesystem::exists(so.stats_path, ec))
    throw_input(so.stats_path +
                ": missing; a DeepCAM dataset holds its normalisation statistics "
                "there, beside train/ and validation/ (data.data_dir)");
  so.stats = read_deepcam_stats(so.stats_path);
  return so;
}

// <root>/{train,validation}/ and <root>/stats.h5, the reference's layout.
SplitSources open_splits(const DataConfig& dc, const std::string& root) {
  SplitSources s;
  DeepcamSourceOptions so = deepcam_options(dc, root);
  so.dir = root + "/train";
  so.limit = file_limit(dc.n_train);
  s.train = open_deepcam_source(so);
  if (dc.n_valid != 0) {
    so.dir = root + "/validation";
    so.limit = file_limit(dc.n_valid);
    s.valid = open_deepcam_source(so);
  }
  return s;
}

// Any directory of DeepCAM files, normalised with data.data_dir's stats.h5.
std::shared_ptr<SampleSource> open_directory(const DataConfig& dc, const std::string& dir) {
  DeepcamSourceOptions so = deepcam_options(dc, dc.data_dir);
  so.dir = dir;
  return open_deepcam_source(so);
}

DatasetType deepcam_dataset() {
  DatasetType t;
  t.name = "deepcam";
  t.sample_dims = "[H, W, C]";
  t.keys = {"channels", "data_dir_prefix", "train_order"};
  t.selection_key = "channels";
  t.labels = true;
  t.validates_every_sample = true;  // the reference's validation reader
  t.default_metrics = {"iou"};
  t.check = check;
  t.model_sample_shape = [](const DataConfig& d) {
    return Shape{d.sample_shape[0], d.sample_shape[1], static_cast<int64_t>(d.channels.size())};
  };
  t.open_splits = open_splits;
  t.open_directory = open_directory;
  return t;
}

}  // namespace

CREST_REGISTER_DATASET(deepcam, deepcam_dataset());

}  // namespace crest
