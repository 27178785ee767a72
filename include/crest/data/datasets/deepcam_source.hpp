// DeepCAM samples on disk (DEEPCAM.md "Data the reference reads"): one sample per file in the
// reference's HDF5 layout or NVIDIA's numpy layouts (deepcam_files.hpp). Reading selects the
// configured channels (the reference's --channels); decoding normalises each to
// (x - minval) * (1 / (maxval - minval)) in float32 with stats.h5, as the reference does, and
// checks the labels are class ids 0, 1 or 2.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "crest/data/datasets/deepcam_files.hpp"
#include "crest/data/formats/hdf5.hpp"
#include "crest/data/sample_source.hpp"

namespace crest {

struct DeepcamSourceOptions {
  std::string dir;  // e.g. <data_dir>/train
  DeepcamFileFormat format = DeepcamFileFormat::hdf5;
  DeepcamSampleShape shape{768, 1152, 16};  // of every file: H, W and the files' channels
  std::vector<int64_t> channels;            // the channels read, in order; empty = all
  DeepcamStats stats;                       // per file channel (stats.h5): minval, maxval
  std::string stats_path;                   // for messages
  int64_t limit = 0;                        // use only the first `limit` files (sorted); 0 = all
};

// Lists the split and checks the statistics and the channel selection; throws crest::Error
// (input) naming the directory, stats.h5 or the first file when they do not fit together.
std::shared_ptr<SampleSource> open_deepcam_source(const DeepcamSourceOptions& options);

}  // namespace crest
