// The files of a DeepCAM split, in the two layouts crest reads:
//  - the reference's HDF5 (data/cam_hdf5_dataset.py): every file whose name ends in .h5, sorted;
//    climate/data float32 (H, W, C) and climate/labels_0 (H, W) class ids;
//  - NVIDIA's numpy (hpc_results_v3.0 NVIDIA deepcam, src/utils/convert_hdf52*npy.py): either
//    data-<id>.npy float32 (H, W, C) beside label-<id>.npy (H, W), or fused datalabel-<id>.npy
//    float32 (H, W, C + 1) whose last channel is the label. A split holds one or the other.
// Labels come as float (as the files store them) or any integer type and become int32 class ids;
// a float label must be integral. Every error names the file.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "crest/data/formats/hdf5.hpp"

namespace crest {

enum class DeepcamFileFormat { hdf5, npy };
enum class DeepcamNpyLayout { pairs, fused };  // data-*.npy + label-*.npy, or datalabel-*.npy

struct DeepcamFiles {
  DeepcamFileFormat format = DeepcamFileFormat::hdf5;
  DeepcamNpyLayout npy_layout = DeepcamNpyLayout::pairs;  // for npy
  std::vector<std::string> files;  // sorted; for npy pairs the data-*.npy files
  std::string describe() const;    // "deepcam-hdf5", "deepcam-npy", "deepcam-npy-fused"
};

// The sample files of `dir` in `format`. Throws crest::Error (input) naming the directory when it
// holds none, or (npy) holds both layouts.
DeepcamFiles list_deepcam_files(const std::string& dir, DeepcamFileFormat format);

// label-<id>.npy beside data-<id>.npy.
std::string deepcam_label_path(const std::string& data_path);

// The shape of one sample file (the data's, C without the fused label channel). Throws
// crest::Error (input) naming the file when it is not a DeepCAM sample.
DeepcamSampleShape probe_deepcam_file(const std::string& path, DeepcamFileFormat format,
                                      DeepcamNpyLayout layout);

// Reads one sample: data_hwc H*W*C floats, labels_hw H*W int32 class ids (not range-checked
// here). The file's shape must be `expected`; the error names the file, found and expected.
void read_deepcam_file(const std::string& path, DeepcamFileFormat format, DeepcamNpyLayout layout,
                       const DeepcamSampleShape& expected, float* data_hwc, int32_t* labels_hw);

// Whether read_deepcam_window reads only a window's bytes: HDF5 (a hyperslab) and data-*.npy
// (one read per row); a fused datalabel-*.npy interleaves the label with every pixel's channels,
// so it is read whole.
bool deepcam_reads_windows(DeepcamFileFormat format, DeepcamNpyLayout layout);

// Reads `window` of one sample's data (data_block_hwc: its pixels times C floats) and the whole
// label map (labels_hw, when not null). Only the window's data bytes where
// deepcam_reads_windows(); else the whole sample, then the window copied out.
void read_deepcam_window(const std::string& path, DeepcamFileFormat format, DeepcamNpyLayout layout,
                         const DeepcamSampleShape& expected, const DeepcamWindow& window,
                         float* data_block_hwc, int32_t* labels_hw);

// Reads one sample's label map alone (a pipeline's last stage: SampleSource::read_targets), the
// data's shape checked as read_deepcam_file checks it: HDF5's climate/labels, or the label-*.npy
// of a data-/label- pair. Only where deepcam_reads_windows() (a fused datalabel-*.npy
// interleaves the labels with the data).
void read_deepcam_labels(const std::string& path, DeepcamFileFormat format, DeepcamNpyLayout layout,
                         const DeepcamSampleShape& expected, int32_t* labels_hw);

}  // namespace crest
