// The HDF5 sample reader: the input is the file. crest's checks around libhdf5 (the probe of
// climate/data and climate/labels_0, shapes, types, label values, stats.h5) and `crest inspect`'s
// listing. In process (hdf5_in_process.hpp), not through crest's reader process, so that the
// sanitizers see libhdf5 too; a crash inside libhdf5 itself is reported upstream-style in
// docs/security.md (crest contains it in the reader process).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "crest/core/error.hpp"
#include "crest/data/formats/hdf5_in_process.hpp"
#include "fuzz_input_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static crest::fuzz::InputFile file;
  const std::string& path = file.write(data, size);
  try {
    const crest::DeepcamSampleShape shape = crest::hdf5_in_process::probe_deepcam_sample(path);
    // Buffers as the loader and `crest validate` size them, from the probed shape: the probe
    // must refuse shapes the file does not store, so -malloc_limit_mb bounds what it lets
    // through.
    const auto pixels = static_cast<size_t>(shape.height) * static_cast<size_t>(shape.width);
    std::vector<float> image(pixels * static_cast<size_t>(shape.channels));
    std::vector<int32_t> labels(pixels);
    crest::hdf5_in_process::read_deepcam_sample(path, shape, image.data(), labels.data());
  } catch (const crest::Error&) {
  }
  try {
    (void)crest::hdf5_in_process::read_deepcam_stats(path);
  } catch (const crest::Error&) {
  }
  try {
    (void)crest::hdf5_in_process::describe_hdf5(path);
  } catch (const crest::Error&) {
  }
  return 0;
}
