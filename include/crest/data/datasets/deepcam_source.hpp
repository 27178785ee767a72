// DeepCAM samples on disk (SPEC.md §2): one HDF5 file per sample (`climate/data` float32
// [H, W, 16], `climate/labels_0` [H, W] class ids) or NVIDIA's .npy variant (data-<id>.npy
// float32 [H, W, C] beside label-<id>.npy [H, W]). Decoding normalises each channel to
// (x - minval) / (maxval - minval) with the split's stats.h5 and casts labels to int32, checking
// they are 0, 1 or 2.
#pragma once
#include <memory>
#include <string>

#include "crest/data/formats/hdf5.hpp"
#include "crest/data/sample_source.hpp"

namespace crest {

enum class DeepcamFileFormat { hdf5, npy };

struct DeepcamSourceOptions {
  std::string dir;  // e.g. <data_dir>/train
  DeepcamFileFormat format = DeepcamFileFormat::hdf5;
  int64_t height = 768, width = 1152, channels = 16;
  DeepcamStats stats;  // min-max normalisation per channel (stats.h5)
  int64_t limit = 0;   // use only the first `limit` files (sorted); 0 = all
};

std::shared_ptr<SampleSource> open_deepcam_source(const DeepcamSourceOptions& options);
const char* deepcam_file_suffix(DeepcamFileFormat format);  // ".h5", ".npy" (data-*.npy)

}  // namespace crest
