// data.name: dummy — synthetic CosmoFlow-shaped samples made from data.seed, no files: for
// trying a config, benchmarks and tests (crest/data/dummy_dataset.hpp).
#include "crest/data/dummy_dataset.hpp"
#include "crest/train/dataset_registry.hpp"
#include "datasets/sample_checks.hpp"

namespace crest {
namespace {

// The validation split has its own seed, so it is not the training samples again.
SplitSources open_splits(const DataConfig& dc, const std::string& /*root*/) {
  SplitSources s;
  s.train = make_dummy_source(dc.sample_shape, dc.target_shape[0], dc.n_train, dc.seed);
  if (dc.n_valid > 0)
    s.valid = make_dummy_source(dc.sample_shape, dc.target_shape[0], dc.n_valid, dc.seed + 0x5EED);
  return s;
}

DatasetType dummy_dataset() {
  DatasetType t;
  t.name = "dummy";
  t.sample_dims = "[D, H, W, C]";
  t.check = datasets::check_cosmoflow_samples;
  t.open_splits = open_splits;  // no open_directory: it has no files
  return t;
}

}  // namespace

CREST_REGISTER_DATASET(dummy, dummy_dataset());

}  // namespace crest
