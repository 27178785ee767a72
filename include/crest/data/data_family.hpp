// The data families' registry: a family of sample files (crest datagen <name>, crest validate
// --format <name>) -> how it writes a learnable synthetic set in its reference formats, and how
// it recognises and checks its sample files. Each family registers itself in its own file under
// src/data/families/ with one line,
//
//   CREST_REGISTER_DATA_FAMILY(deepcam, deepcam_family());  // a DataFamily
//
// so the data tools know no family by name (docs/extending.md). What a training run reads of a
// dataset (its config keys, its splits) is the dataset registry (crest/train/dataset_registry.hpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "crest/core/shape.hpp"
#include "crest/data/datagen.hpp"
#include "crest/data/validate.hpp"

namespace crest {

// One `crest datagen` run of a family: what it writes, file by file, from any worker thread.
class DatagenRun {
 public:
  virtual ~DatagenRun() = default;
  // The log line's sample description: "128^3 x 4 int16".
  virtual std::string describe() const = 0;
  // Writes sample `index` of `split` (0 train, 1 validation) drawn from `seed` to `path` (and
  // any companion file beside it); called by up to `workers` threads at once, each with its own
  // `worker` index. Returns the bytes written.
  virtual int64_t write(int worker, int split, int64_t index, uint64_t seed,
                        const std::string& path) = 0;
  // After every sample: the files beside the splits (DeepCAM's stats.h5, computed over train),
  // in `out`. Returns the bytes written.
  virtual int64_t finish(const std::string& /*out*/) { return 0; }
};

// What checking one sample file found (its errors are thrown as crest::Error).
struct SampleFileFacts {
  Shape shape;          // the sample, as the report compares them
  int64_t bytes = 0;    // the file and its companions
  std::string variant;  // appended to the layout's name in the report ("gzip"), or ""
  int64_t samples = 1;  // the samples the file holds (a TFRecord shard: its records)
};

// One way a family lays out its samples in files.
struct SampleFileLayout {
  std::string name;     // the report's format: "cosmoflow-tfrecord"
  std::string pattern;  // for messages: "*.tfrecord"
  std::function<bool(const std::string& file_name)> matches;
  // Reads and checks one file completely; throws crest::Error saying what is wrong. `scratch`
  // is one buffer per worker thread, kept between files.
  std::function<SampleFileFacts(const std::string& path, const ValidateOptions& options,
                                std::vector<std::byte>& scratch)>
      check;
};

struct DataFamily {
  std::string name;         // crest datagen <name>, crest validate --format <name>
  std::string description;  // for the help: "CosmoFlow 3-D volumes"
  // crest datagen: its --format values (the first is the default), the files it writes beside
  // the splits (never replaced without --overwrite), its checks of the options (after the shared
  // ones; errors are usage errors naming the option), each sample's file name, and a run.
  std::vector<std::string> formats;
  std::vector<std::string> root_files;
  std::function<void(const DatagenOptions&)> check_options;
  std::function<std::string(const DatagenOptions&, int64_t index)> file_name;
  std::function<std::unique_ptr<DatagenRun>(const DatagenOptions&, int workers)> start;
  // crest validate: its file layouts, and a check of the dataset root's own files when the
  // directory has splits (each problem as file, what is wrong); may be null.
  std::vector<SampleFileLayout> layouts;
  std::function<std::vector<std::pair<std::string, std::string>>(const std::string& root,
                                                                 const Shape& sample_shape)>
      check_root;
};

bool register_data_family(DataFamily family);
// The registered entry; an unknown name throws crest::Error (usage) listing the registered ones.
const DataFamily& find_data_family(const std::string& name);
std::vector<std::string> data_family_names();  // sorted

#define CREST_REGISTER_DATA_FAMILY(id, ...)                              \
  [[maybe_unused]] static const bool crest_data_family_registered_##id = \
      ::crest::register_data_family(__VA_ARGS__)

}  // namespace crest
