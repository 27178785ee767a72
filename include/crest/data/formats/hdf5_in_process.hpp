// The HDF5 readers of crest/data/formats/hdf5.hpp run in this process: libhdf5 parses the file
// here. crest itself calls them only inside its HDF5 reader process (hdf5_reader.hpp), so that a
// crash or memory corruption inside libhdf5 on a damaged or hostile file cannot reach the process
// that trains or validates; the fuzz harness calls them directly, to fuzz crest's checks and
// libhdf5 under the sanitizers. Same contracts and errors as the functions in hdf5.hpp.
#pragma once
#include <cstdint>
#include <string>

#include "crest/data/formats/hdf5.hpp"

namespace crest::hdf5_in_process {

DeepcamSampleShape probe_deepcam_sample(const std::string& path);
int64_t deepcam_data_offset(const std::string& path);
void read_deepcam_sample(const std::string& path, const DeepcamSampleShape& expected,
                         float* data_hwc, int32_t* labels_hw);
void read_deepcam_data_block(const std::string& path, const DeepcamSampleShape& expected,
                             const DeepcamWindow& window, float* data_block_hwc);
DeepcamStats read_deepcam_stats(const std::string& path);
std::string describe_hdf5(const std::string& path);

}  // namespace crest::hdf5_in_process
