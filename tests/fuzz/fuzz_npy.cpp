// .npy headers and data: the input is the file; the header alone, then the whole array (byte
// swapping and Fortran-order transposition included), then a typed read into a buffer of the
// header's own shape as the CosmoFlow/DeepCAM npy readers do.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "crest/core/error.hpp"
#include "crest/data/formats/npy.hpp"
#include "fuzz_input_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static crest::fuzz::InputFile file;
  const std::string& path = file.write(data, size);
  try {
    const crest::NpyHeader header = crest::read_npy_header(path);
    const crest::NpyArray array = crest::read_npy(path);
    if (const auto dtype = crest::to_crest_dtype(array.dtype)) {
      std::vector<std::byte> out(array.data.size());
      crest::read_npy_into(path, *dtype, header.shape, out.data());
    }
  } catch (const crest::Error&) {
  }
  return 0;
}
