// `crest validate`: checks every sample file of a dataset before a long run finds the bad one at
// hour three. CosmoFlow: framing, both CRCs of every record, the gzip stream, exactly one Example,
// features x (one bytes value of the expected length) and y (target floats, finite). DeepCAM
// (every *.h5 of a split, or NVIDIA's data-/label- or fused datalabel- npy): datasets, shapes,
// dtypes, finite data, labels in {0, 1, 2}, and <dir>/stats.h5 beside the splits. The expected
// shape is given, or taken from the majority of the files; every file that differs is listed
// with what is wrong. Which files are samples and how each is checked is its data family's
// (crest/data/data_family.hpp, src/data/families/).
#pragma once
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "crest/core/shape.hpp"

namespace crest {

struct ValidateOptions {
  std::string dir;                    // a dataset root (train/, validation/) or one split directory
  std::string format;                 // a data family's name; "": from the files
  std::optional<Shape> sample_shape;  // [D, H, W, C] or [H, W, C]; default: the majority
  int64_t targets = 4;                // CosmoFlow y length
  int threads = 0;                    // 0 = hardware threads
};

struct ValidateReport {
  std::string format;  // what was found, e.g. "cosmoflow-tfrecord-gzip"
  Shape sample_shape;  // expected (given or majority)
  int64_t files = 0, samples = 0, bytes = 0;
  std::vector<std::pair<std::string, std::string>> errors;  // file, what is wrong
  double seconds = 0;
  bool ok() const { return errors.empty(); }
  std::string summary() const;
};

ValidateReport validate_dataset(const ValidateOptions& options, std::ostream& log);

}  // namespace crest
