#include "datasets/sample_checks.hpp"

#include "config/text.hpp"

namespace crest::datasets {

void check_sample_shape(const DataSection& r, const DataConfig& d, size_t rank,
                        const std::string& dims) {
  if (d.sample_shape.rank() == 0) r.fail("sample_shape", "required key is missing (" + dims + ")");
  if (static_cast<size_t>(d.sample_shape.rank()) != rank)
    r.fail("sample_shape", "expected " + std::to_string(rank) + " entries " + dims + ", got " +
                               std::to_string(d.sample_shape.rank()) + ": " +
                               config::list_text(d.sample_shape.to_vector()));
}

void check_cosmoflow_samples(const DataSection& r, const DataConfig& d) {
  if (d.format == SampleFileFormat::hdf5 || d.format == SampleFileFormat::jpeg)
    r.fail("format", "CosmoFlow samples are tfrecord or npy; " + enum_name(d.format) +
                         " is another dataset's");
  if (!r.has("n_train")) r.fail("n_train", "required key is missing");
  check_sample_shape(r, d, 4, "[D, H, W, C]");
}

}  // namespace crest::datasets
