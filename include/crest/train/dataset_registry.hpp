// The dataset registry: data.name -> the keys of the data section the dataset reads, its rules,
// what its samples and targets are to the model, and how its splits are opened. Each dataset
// registers itself in its own file under src/train/datasets/ with one line,
//
//   CREST_REGISTER_DATASET(deepcam, deepcam_dataset());  // a DatasetType
//
// so the config reader, the model binding, the loaders and crest predict know no dataset by name
// (docs/extending.md shows a whole one). The readers themselves live in the data part
// (crest/data/datasets/).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "crest/data/sample_source.hpp"
#include "crest/train/config.hpp"

namespace crest {

// What a dataset's check sees of the data section: whether a key was given, and failures that
// name the config file, the key's line and its path (data.channels[2]); both exit as bad input.
class DataSection {
 public:
  virtual bool has(const std::string& key) const = 0;
  [[noreturn]] virtual void fail(const std::string& key, const std::string& message) const = 0;
  // Item `index` of the list `key`.
  [[noreturn]] virtual void fail_item(const std::string& key, size_t index,
                                      const std::string& message) const = 0;

 protected:
  ~DataSection() = default;
};

// Training's two splits; valid is null when there is no validation.
struct SplitSources {
  std::shared_ptr<SampleSource> train, valid;
};

struct DatasetType {
  std::string name;         // data.name
  std::string sample_dims;  // data.sample_shape's axes, channels last: "[D, H, W, C]"
  // Its own keys of the data section: refused, naming it, under any dataset that does not list
  // them too (deepcam's channels under cosmo).
  std::vector<std::string> keys;
  // The key that selects part of each file's sample for the model (deepcam's channels), or "":
  // messages about the model's input name it beside data.sample_shape.
  std::string selection_key;
  // The targets: int32 class labels [H, W] per sample (segmentation), else float targets
  // [model.target_size].
  bool labels = false;
  // With labels: one class per sample, shape [] (image classification), not one per pixel.
  bool one_label_per_sample = false;
  // Validation reads every sample in batches as full as the samples allow (DeepCAM's reference);
  // else full batches only (CosmoFlow's drop_remainder), so n_valid < batch_size is refused.
  bool validates_every_sample = false;
  // train.metrics when the config gives none ({} keeps the loss's default).
  std::vector<std::string> default_metrics;
  // Its rules and defaults, after every key of the section was read; fails through `section`.
  std::function<void(const DataSection& section, DataConfig& d)> check;
  // The sample as the model reads it, channels last; null: data.sample_shape.
  std::function<Shape(const DataConfig&)> model_sample_shape;
  // Training's splits from the dataset at `root` (data.data_dir, or its staged copy), limited to
  // n_train / n_valid. Errors name the file.
  std::function<SplitSources(const DataConfig&, const std::string& root)> open_splits;
  // Every sample file of the directory `dir`, read as the dataset reads its splits (crest
  // predict); null for a dataset without files (dummy), which also has nothing to stage.
  std::function<std::shared_ptr<SampleSource>(const DataConfig&, const std::string& dir)>
      open_directory;
};

bool register_dataset_type(DatasetType type);
// The registered entry; an unknown name throws crest::Error (input) listing the registered ones.
const DatasetType& find_dataset_type(const std::string& name);
const DatasetType* find_dataset_type_or_null(const std::string& name);
std::vector<std::string> dataset_names();  // sorted

#define CREST_REGISTER_DATASET(id, ...)                              \
  [[maybe_unused]] static const bool crest_dataset_registered_##id = \
      ::crest::register_dataset_type(__VA_ARGS__)

}  // namespace crest
