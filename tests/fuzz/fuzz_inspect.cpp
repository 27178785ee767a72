// `crest inspect FILE` on any file: format detection by content, then whichever reader it picks
// (TFRecord plain or gzip with the first record's Example, npy, safetensors). The bound on
// memory is the harness's -malloc_limit_mb: no allocation may exceed it on inputs of a few KB.
#include <cstddef>
#include <cstdint>

#include "crest/core/error.hpp"
#include "crest/data/formats/inspect.hpp"
#include "fuzz_input_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static crest::fuzz::InputFile file;
  const std::string& path = file.write(data, size);
  try {
    // HDF5 files go to fuzz_hdf5, which runs with the allocator settings libhdf5 needs (see
    // tests/fuzz/smoke.sh); here the strict allocation limit stays on for crest's own readers.
    if (crest::detect_data_file_format(path) == crest::DataFileFormat::hdf5) return 0;
    (void)crest::inspect_file(path);
  } catch (const crest::Error&) {
  }
  return 0;
}
