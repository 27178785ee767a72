// `crest datagen`: learnable synthetic datasets written in exactly the reference formats, so the
// whole pipeline (staging, loading, training, validation) runs without the multi-TB downloads.
// <out>/train/ and <out>/validation/ (and <out>/stats.h5 for DeepCAM, computed over train).
// A file is a pure function of (seed, split, index): parallel generation gives the same bytes as
// serial, and any file can be regenerated alone.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <string>

namespace crest {

struct DatagenOptions {
  std::string family = "cosmoflow";  // a registered data family (crest/data/data_family.hpp)
  std::string out;
  int64_t n_train = 0, n_valid = 0;
  int64_t size = 128;                  // CosmoFlow cube edge (multiple of 32)
  int64_t height = 768, width = 1152;  // DeepCAM
  std::string
      format;  // one of the family's formats; "": its first (cosmoflow tfrecord, deepcam hdf5)
  bool gzip = false;  // CosmoFlow TFRecords GZIP-compressed (as v1.0 data)
  // DeepCAM npy: NVIDIA's fused datalabel-*.npy (the label as the last channel) instead of
  // data-*.npy + label-*.npy pairs.
  bool fused = false;
  uint64_t seed = 0;
  int threads = 0;         // files generated in parallel; 0 = hardware threads
  bool overwrite = false;  // replace existing sample files (otherwise refuse)
};

struct DatagenResult {
  int64_t files = 0;  // sample files written (a .npy pair counts once)
  int64_t bytes = 0;  // bytes written
  double seconds = 0;
};

// Throws crest::Error (usage/input) for impossible options or existing output (without
// overwrite), naming the option or the path.
DatagenResult generate_dataset(const DatagenOptions& options, std::ostream& log);

// Sample `index`'s file name, as the family's readers expect it: CosmoFlow sample-<i>.tfrecord or
// sample-<i>.data.npy; DeepCAM data-<i>.h5, data-<i>.npy or (fused) datalabel-<i>.npy.
std::string datagen_file_name(const DatagenOptions& options, int64_t index);

}  // namespace crest
