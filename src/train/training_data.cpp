#include "crest/train/training_data.hpp"

#include <ostream>

#include "crest/data/datasets/cosmoflow_source.hpp"
#include "crest/data/dummy_dataset.hpp"
#include "crest/data/staging.hpp"
#include "crest/dist/communicator.hpp"

namespace crest {

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
  CosmoflowSourceOptions so;
  so.format =
      dc.format == SampleFileFormat::npy ? CosmoflowFileFormat::npy : CosmoflowFileFormat::tfrecord;
  so.gzip = dc.compression == Compression::gzip;
  so.sample_shape = dc.sample_shape;
  so.targets = dc.target_shape[0];
  so.apply_log = dc.apply_log;
  so.dir = root + "/train";
  so.limit = dc.n_train;
  d.train = open_cosmoflow_source(so);
  if (dc.n_valid > 0) {
    so.dir = root + "/validation";
    so.limit = dc.n_valid;
    d.valid = open_cosmoflow_source(so);
  }
  return d;
}

LoaderOptions loader_options(const DataConfig& dc) {
  LoaderOptions lo;
  lo.batch_size = dc.batch_size;
  lo.shuffle = dc.shuffle;
  lo.seed = dc.seed;
  lo.prefetch = dc.prefetch;
  lo.threads = dc.n_parallel_reads;
  lo.cache_bytes = dc.cache_bytes;
  lo.skip_bad_samples = dc.on_error == OnSampleError::skip;
  return lo;
}

}  // namespace crest
