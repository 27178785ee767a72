#include "crest/train/training_data.hpp"

#include <ostream>

#include "crest/core/error.hpp"
#include "crest/data/deepcam_reference_order.hpp"
#include "crest/data/staging.hpp"
#include "crest/dist/communicator.hpp"
#include "crest/train/dataset_registry.hpp"
#include "staged_parts.hpp"

namespace crest {

TrainingData open_training_data(const Config& config, Communicator& comm, std::ostream& log) {
  const DataConfig& dc = config.data;
  const DatasetType& type = find_dataset_type(dc.name);
  TrainingData d;
  std::string root = dc.data_dir;
  if (type.open_directory && !dc.stage_dir.empty()) {  // a dataset of files
    StageOptions stage;
    stage.from = dc.data_dir;
    stage.to = dc.stage_dir;
    stage_node_parts(config, comm, stage);
    d.stage_s = stage_dataset(stage, comm, log).seconds;
    root = dc.stage_dir;
  }
  SplitSources splits = type.open_splits(dc, root);
  d.train = std::move(splits.train);
  d.valid = std::move(splits.valid);
  return d;
}

std::shared_ptr<SampleSource> open_split(const Config& config, Communicator& comm,
                                         std::ostream& log, const std::string& split) {
  const DataConfig& dc = config.data;
  if (split == "train" || split == "validation") {
    TrainingData d = open_training_data(config, comm, log);
    if (split == "train") return d.train;
    if (!d.valid)
      throw_input(config.source + ": data.n_valid is 0: the config has no validation split");
    return d.valid;
  }
  // A directory of sample files in the dataset's format, every file of it.
  const DatasetType& type = find_dataset_type(dc.name);
  if (!type.open_directory)
    throw_input(split + ": the " + dc.name +
                " dataset has no files; give --split train or validation");
  return type.open_directory(dc, split);
}

void check_label_classes(const TrainingData& data, int64_t predicted_classes,
                         const DataConfig& dc) {
  const std::vector<std::string> train = data.train->class_names();
  if (train.empty()) return;
  if (data.valid) {
    const std::vector<std::string> valid = data.valid->class_names();
    if (!valid.empty() && valid != train) {
      size_t i = 0;
      while (i < train.size() && i < valid.size() && train[i] == valid[i]) ++i;
      const auto name = [](const std::vector<std::string>& v, size_t k) {
        return k < v.size() ? "'" + v[k] + "'" : std::string("none");
      };
      throw_input(dc.data_dir + ": the training and validation splits hold different classes (" +
                  std::to_string(train.size()) + " and " + std::to_string(valid.size()) +
                  "; class " + std::to_string(i) + " is " + name(train, i) + " in training, " +
                  name(valid, i) + " in validation): a label would name another class");
    }
  }
  if (predicted_classes > 0 && static_cast<int64_t>(train.size()) > predicted_classes)
    throw_input(dc.data_dir + ": holds " + std::to_string(train.size()) +
                " classes but the model predicts " + std::to_string(predicted_classes) +
                " (model.n_classes)");
}

LoaderOptions loader_options(const DataConfig& dc) {
  LoaderOptions lo;
  lo.batch_size = dc.batch_size;
  lo.shuffle = dc.shuffle;
  lo.order = dc.train_order;
  // The reference's sampler has its own fixed seed; data.seed then seeds only the weights.
  lo.seed = dc.train_order == TrainOrder::reference ? kDeepcamSamplerSeed : dc.seed;
  lo.prefetch = dc.prefetch;
  lo.threads = dc.n_parallel_reads;
  lo.cache_bytes = dc.cache_bytes;
  lo.skip_bad_samples = dc.on_error == OnSampleError::skip;
  return lo;
}

LoaderOptions validation_loader_options(const DataConfig& dc) {
  LoaderOptions vo = loader_options(dc);
  vo.shuffle = dc.shuffle_valid;
  vo.order = TrainOrder::crest;  // train_order orders the training split only
  vo.seed = dc.seed;
  vo.cache_bytes = 0;  // the cache bound is the training shard's
  // DeepCAM validates every sample (the reference's validation reader); CosmoFlow's reference
  // batches validation with drop_remainder, as training.
  vo.every_sample = find_dataset_type(dc.name).validates_every_sample;
  return vo;
}

}  // namespace crest
