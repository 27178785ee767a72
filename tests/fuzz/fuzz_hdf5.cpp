// The HDF5 sample reader: the input is the file. crest's checks around libhdf5 (the probe of
// climate/data and climate/labels_0, shapes, types, label values, stats.h5) and `crest inspect`'s
// listing. A crash inside libhdf5 itself is reported upstream-style in docs/security.md.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "crest/core/error.hpp"
#include "crest/data/formats/hdf5.hpp"
#include "fuzz_input_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static crest::fuzz::InputFile file;
  const std::string& path = file.write(data, size);
  try {
    const crest::DeepcamSampleShape shape = crest::probe_deepcam_sample(path);
    // Buffers as the loader and `crest validate` size them, from the probed shape: the probe
    // must refuse shapes the file does not store, so -malloc_limit_mb bounds what it lets
    // through.
    const auto pixels = static_cast<size_t>(shape.height) * static_cast<size_t>(shape.width);
    std::vector<float> image(pixels * static_cast<size_t>(shape.channels));
    std::vector<int32_t> labels(pixels);
    crest::read_deepcam_sample(path, shape, image.data(), labels.data());
  } catch (const crest::Error&) {
  }
  try {
    (void)crest::read_deepcam_stats(path);
  } catch (const crest::Error&) {
  }
  try {
    (void)crest::describe_hdf5(path);
  } catch (const crest::Error&) {
  }
  return 0;
}
