// HDF5 files of the DeepCAM dataset (SPEC.md §2), through the HDF5 C library.
//
// Sample files data-*.h5: `climate/data` float32 (H, W, C) and `climate/labels_0` (H, W) class
// ids, stored as float32 in the real data (any float or integer type is accepted on read).
// stats.h5: group `climate` with `count` (integer scalar) and float arrays `minval`, `maxval`,
// `mean`, `sqmean` of one value per channel.
//
// The readers (probe, read_deepcam_sample, read_deepcam_stats, describe_hdf5) do not run libhdf5
// in this process: they are requests to crest's HDF5 reader process (hdf5_reader.hpp), so that
// libhdf5's crashes and overflows on damaged or hostile files end the reader, not crest; the
// in-process versions it runs are in hdf5_in_process.hpp. The writers run here (crest's own
// files).
//
// Thread safety: an HDF5 library is only safe to call from several threads when it was built
// with --enable-threadsafe, which no distribution promises (Debian's serial build happens to be;
// others are not). Every function here therefore holds one process-wide mutex for its whole
// duration; code elsewhere in crest that calls HDF5 directly must hold hdf5_mutex() too.
// HDF5's habit of printing its error stack to stderr is switched off; failures become
// crest::Error (input) naming the file, the dataset and HDF5's own innermost reason.
//
// Writers are atomic: HDF5 writes a temporary file next to the target, which is fsync'ed and
// renamed into place only once complete.
#pragma once
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace crest {

// The lock every HDF5 call in crest is made under.
std::mutex& hdf5_mutex();

struct DeepcamSampleShape {
  int64_t height = 0;
  int64_t width = 0;
  int64_t channels = 0;

  bool operator==(const DeepcamSampleShape&) const = default;
  std::string str() const;  // "768x1152x16 (HxWxC)"
};

// Opens `path` and checks climate/data is float32 of rank 3 and climate/labels_0 of rank 2 (any
// float or integer type) with the same height and width. Returns the shape; throws crest::Error
// (input) naming the file and the dataset otherwise.
DeepcamSampleShape probe_deepcam_sample(const std::string& path);

// Where climate/data's elements start in the file when they lie there as one C-order array
// (contiguous layout, no filters, all of it stored: the real dataset's files and crest
// datagen's); -1 when they do not (chunked, compressed), so the file can only be read whole.
// Staging keeps a node's rows of it (docs/data.md, "Staging"). The same checks as
// probe_deepcam_sample.
int64_t deepcam_data_offset(const std::string& path);

// Reads one sample straight into caller buffers: data_hwc holds H*W*C floats, labels_hw H*W
// int32 class ids (converted from the stored type; a float label must be an integral value, an
// integer label must fit int32). Either pointer may be null to skip that dataset. The file's
// shape must equal `expected`; the error names found and expected.
void read_deepcam_sample(const std::string& path, const DeepcamSampleShape& expected,
                         float* data_hwc, int32_t* labels_hw);

// Rows [h0, h1) and columns [w0, w1) of a sample, all channels: the block of every sample one
// rank of a spatial split reads (docs/distributed.md, "Spatial split").
struct DeepcamWindow {
  int64_t h0 = 0, h1 = 0, w0 = 0, w1 = 0;
  int64_t pixels() const { return (h1 - h0) * (w1 - w0); }
  std::string str() const;  // "rows [0, 384) x columns [576, 1152)"
};

// Reads only `window` of climate/data into data_block_hwc ([h1-h0, w1-w0, C] floats): a
// hyperslab, so libhdf5 reads the rows the window needs, not the whole sample. The same checks as
// read_deepcam_sample; a window that is empty or outside the sample is refused naming both.
void read_deepcam_data_block(const std::string& path, const DeepcamSampleShape& expected,
                             const DeepcamWindow& window, float* data_block_hwc);

// Writes a sample as the real dataset stores it (both datasets float32, little-endian,
// contiguous), atomically.
void write_deepcam_sample(const std::string& path, const DeepcamSampleShape& shape,
                          const float* data_hwc, const float* labels_hw);

struct DeepcamStats {
  int64_t count = 0;
  std::vector<float> minval, maxval, mean, sqmean;  // one per channel
};

// Reads stats.h5; checks all four arrays are 1-D float with the same (non-zero) length.
DeepcamStats read_deepcam_stats(const std::string& path);
// Writes stats.h5 (count int64 scalar, arrays float32), atomically.
void write_deepcam_stats(const std::string& path, const DeepcamStats& stats);

// A listing of every group and dataset in the file with type, shape and storage, one per line
// (for `crest inspect`).
std::string describe_hdf5(const std::string& path);

}  // namespace crest
