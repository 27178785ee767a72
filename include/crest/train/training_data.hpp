// The sample sources a config names (its registered dataset, crest/train/dataset_registry.hpp):
// the dummy dataset, or the CosmoFlow or DeepCAM files under
// data.data_dir (staged to data.stage_dir first when set), limited to n_train / n_valid. DeepCAM
// reads <data_dir>/stats.h5 for the normalisation and checks the first file of each split against
// data.sample_shape.
// Shared by `crest train` and `crest bench loader` so both read data the same way.
#pragma once
#include <iosfwd>
#include <memory>

#include "crest/data/loader.hpp"
#include "crest/data/sample_source.hpp"
#include "crest/train/config.hpp"

namespace crest {

class Communicator;

struct TrainingData {
  std::shared_ptr<SampleSource> train, valid;  // valid is null when n_valid is 0
  double stage_s = 0;
};

TrainingData open_training_data(const Config& config, Communicator& comm, std::ostream& log);
// One split for inference (crest predict): "train" or "validation" (the files and limits training
// reads, staged as training stages them), or a directory of sample files in the dataset's format
// (every file; a DeepCAM directory is normalised with data.data_dir's stats.h5).
std::shared_ptr<SampleSource> open_split(const Config& config, Communicator& comm,
                                         std::ostream& log, const std::string& split);
// Labels that name classes (an image folder's class directories) must be the classes the network
// predicts: throws crest::Error (input) naming data.data_dir when the splits' class lists differ
// (a label would mean another class in validation) or when they hold more classes than
// `predicted_classes` (model.n_classes). Sources without class names pass.
void check_label_classes(const TrainingData& data, int64_t predicted_classes, const DataConfig& dc);
// Loader options from the data section (prefetch, threads = n_parallel_reads, cache, on_error).
LoaderOptions loader_options(const DataConfig& data);
// The validation loader's: shuffle_valid, no cache, and (DeepCAM) every sample read.
LoaderOptions validation_loader_options(const DataConfig& data);

}  // namespace crest
