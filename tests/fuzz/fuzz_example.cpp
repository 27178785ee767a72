// tf.train.Example (protobuf wire format): the input is one record's payload. Every feature is
// looked up by name and by each kind, as the dataset readers do.
#include <cstddef>
#include <cstdint>
#include <span>

#include "crest/core/error.hpp"
#include "crest/data/formats/example.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using Kind = crest::ExampleFeature::Kind;
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  try {
    const crest::ExampleView ex = crest::ExampleView::parse(bytes, "fuzz.tfrecord: record 0");
    for (const auto& name : ex.names()) {
      for (const Kind kind : {Kind::bytes, Kind::floats, Kind::int64s, Kind::none}) {
        try {
          const crest::ExampleFeature& f = ex.at(name, kind);
          (void)f.size();
        } catch (const crest::Error&) {
        }
      }
    }
  } catch (const crest::Error&) {
  }
  return 0;
}
