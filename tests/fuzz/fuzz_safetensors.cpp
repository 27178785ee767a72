// safetensors headers and data: the input is the file. Every tensor the reader accepts is copied
// out with its own dtype and shape (read_into, the checkpoint loader's path) where crest has the
// dtype and the rank fits crest::Shape.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "crest/core/error.hpp"
#include "crest/data/safetensors.hpp"
#include "fuzz_input_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static crest::fuzz::InputFile file;
  const std::string& path = file.write(data, size);
  try {
    const crest::SafetensorsFile f(path);
    for (const auto& t : f.tensors()) {
      const auto dtype = crest::to_crest_dtype(t.dtype);
      if (!dtype || t.shape.size() > 8) continue;
      std::vector<std::byte> out(t.bytes);
      f.read_into(t.name, *dtype, t.crest_shape(), out.data());
    }
  } catch (const crest::Error&) {
  }
  return 0;
}
