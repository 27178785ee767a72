// TFRecord framing, uncompressed: every record of the input, with both CRCs checked. The input is
// the file. Any crest::Error is the reader doing its job; a crash, a sanitizer report, an
// allocation beyond -malloc_limit_mb or a hang is a finding.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "crest/core/error.hpp"
#include "crest/data/formats/tfrecord.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  try {
    auto reader = crest::TfRecordReader::from_memory(bytes, "fuzz.tfrecord",
                                                     crest::TfRecordCompression::none);
    std::vector<std::byte> record;
    while (reader.next(record)) {
    }
  } catch (const crest::Error&) {
  }
  return 0;
}
