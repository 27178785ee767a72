#include "crest/train/training_data.hpp"

#include <filesystem>
#include <ostream>

#include "crest/core/error.hpp"
#include "crest/data/datasets/cosmoflow_source.hpp"
#include "crest/data/datasets/deepcam_source.hpp"
#include "crest/data/deepcam_reference_order.hpp"
#include "crest/data/dummy_dataset.hpp"
#include "crest/data/staging.hpp"
#include "crest/dist/communicator.hpp"

namespace crest {
namespace {

// A split's limit: 0 (every file) for DeepCAM's kEverySample.
int64_t file_limit(int64_t configured) { return configured == kEverySample ? 0 : configured; }

CosmoflowSourceOptions cosmoflow_options(const DataConfig& dc) {
  CosmoflowSourceOptions so;
  so.format =
      dc.format == SampleFileFormat::npy ? CosmoflowFileFormat::npy : CosmoflowFileFormat::tfrecord;
  so.gzip = dc.compression == Compression::gzip;
  so.sample_shape = dc.sample_shape;
  so.targets = dc.target_shape[0];
  so.apply_log = dc.apply_log;
  return so;
}

void open_cosmoflow(const DataConfig& dc, const std::string& root, TrainingData& d) {
  CosmoflowSourceOptions so = cosmoflow_options(dc);
  so.dir = root + "/train";
  so.limit = dc.n_train;
  d.train = open_cosmoflow_source(so);
  if (dc.n_valid > 0) {
    so.dir = root + "/validation";
    so.limit = dc.n_valid;
    d.valid = open_cosmoflow_source(so);
  }
}

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
void open_deepcam(const DataConfig& dc, const std::string& root, TrainingData& d) {
  DeepcamSourceOptions so = deepcam_options(dc, root);
  so.dir = root + "/train";
  so.limit = file_limit(dc.n_train);
  d.train = open_deepcam_source(so);
  if (dc.n_valid != 0) {
    so.dir = root + "/validation";
    so.limit = file_limit(dc.n_valid);
    d.valid = open_deepcam_source(so);
  }
}

}  // namespace

TrainingData open_training_data(const Config& config, Communicator& comm, std::ostream& log) {
  const DataConfig& dc = config.data;
  TrainingData d;
  if (dc.name == DatasetKind::dummy) {
    d.train = make_dummy_source(dc.sample_shape, dc.target_shape[0], dc.n_train, dc.seed);
    if (dc.n_valid > 0)
      d.valid =
          make_dummy_source(dc.sample_shape, dc.target_shape[0], dc.n_valid, dc.seed + 0x5EED);
    return d;
  }
  std::string root = dc.data_dir;
  if (!dc.stage_dir.empty()) {
    StageOptions stage;
    stage.from = dc.data_dir;
    stage.to = dc.stage_dir;
    d.stage_s = stage_dataset(stage, comm, log).seconds;
    root = dc.stage_dir;
  }
  if (dc.name == DatasetKind::deepcam)
    open_deepcam(dc, root, d);
  else
    open_cosmoflow(dc, root, d);
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
  if (dc.name == DatasetKind::dummy)
    throw_input(split + ": the dummy dataset has no files; give --split train or validation");
  if (dc.name == DatasetKind::deepcam) {
    DeepcamSourceOptions so = deepcam_options(dc, dc.data_dir);
    so.dir = split;
    return open_deepcam_source(so);
  }
  CosmoflowSourceOptions so = cosmoflow_options(dc);
  so.dir = split;
  return open_cosmoflow_source(so);
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
  vo.every_sample = dc.name == DatasetKind::deepcam;
  return vo;
}

}  // namespace crest
