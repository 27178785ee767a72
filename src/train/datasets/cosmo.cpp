// data.name: cosmo — the CosmoFlow reference's files: <data_dir>/{train,validation}/, one sample
// per file, TFRecords (gzip or not) or crest's .npy pairs; float targets.
#include "crest/data/datasets/cosmoflow_source.hpp"
#include "crest/train/dataset_registry.hpp"
#include "datasets/sample_checks.hpp"

namespace crest {
namespace {

CosmoflowSourceOptions cosmoflow_options(const DataConfig& dc, const std::string& dir,
                                         int64_t limit) {
  CosmoflowSourceOptions so;
  so.format =
      dc.format == SampleFileFormat::npy ? CosmoflowFileFormat::npy : CosmoflowFileFormat::tfrecord;
  so.gzip = dc.compression == Compression::gzip;
  so.sample_shape = dc.sample_shape;
  so.targets = dc.target_shape[0];
  so.apply_log = dc.apply_log;
  so.dir = dir;
  so.limit = limit;
  return so;
}

SplitSources open_splits(const DataConfig& dc, const std::string& root) {
  SplitSources s;
  s.train = open_cosmoflow_source(cosmoflow_options(dc, root + "/train", dc.n_train));
  if (dc.n_valid > 0)
    s.valid = open_cosmoflow_source(cosmoflow_options(dc, root + "/validation", dc.n_valid));
  return s;
}

void check(const DataSection& r, DataConfig& d) {
  if (d.data_dir.empty())
    r.fail("data_dir",
           "required for data.name: cosmo (the directory holding train/ and validation/), or use "
           "data.name: dummy for synthetic data");
  datasets::check_cosmoflow_samples(r, d);
}

DatasetType cosmo_dataset() {
  DatasetType t;
  t.name = "cosmo";
  t.sample_dims = "[D, H, W, C]";
  t.check = check;
  t.open_splits = open_splits;
  t.open_directory = [](const DataConfig& dc, const std::string& dir) {
    return open_cosmoflow_source(cosmoflow_options(dc, dir, 0));
  };
  return t;
}

}  // namespace

CREST_REGISTER_DATASET(cosmo, cosmo_dataset());

}  // namespace crest
