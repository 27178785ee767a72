// CosmoFlow samples on disk (SPEC.md §1): one sample per file, as the reference's TFRecords
// (plain or GZIP; one tf.train.Example with `x` = raw int16 volume bytes [D, H, W, C] and `y` = 4
// floats) or NVIDIA's .npy variant (<stem>.data.npy int16 [D, H, W, C] and <stem>.label.npy
// float32 [targets]). Decoding casts int16 to float32 and applies x <- ln(x + 1) when apply_log
// is set, as the reference preprocessing does.
#pragma once
#include <memory>
#include <string>

#include "crest/core/shape.hpp"
#include "crest/data/sample_source.hpp"

namespace crest {

enum class CosmoflowFileFormat { tfrecord, npy };

struct CosmoflowSourceOptions {
  std::string dir;  // e.g. <data_dir>/train
  CosmoflowFileFormat format = CosmoflowFileFormat::tfrecord;
  bool gzip = false;   // TFRecords are GZIP-compressed (data.compression)
  Shape sample_shape;  // [D, H, W, C]
  int64_t targets = 4;
  bool apply_log = false;
  int64_t limit = 0;  // use only the first `limit` files (sorted); 0 = all
};

// Lists the files (sorted) and checks there are enough; every per-file defect is found when the
// file is read. Throws crest::Error (input) naming the directory.
std::shared_ptr<SampleSource> open_cosmoflow_source(const CosmoflowSourceOptions& options);

// The file-name suffixes of a format (".tfrecord" for both compressions; ".data.npy").
const char* cosmoflow_file_suffix(CosmoflowFileFormat format);

}  // namespace crest
