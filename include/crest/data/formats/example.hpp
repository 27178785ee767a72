// tf.train.Example: TensorFlow's record payload, encoded and decoded by hand (protobuf wire
// format; SPEC.md §3).
//
//   Example  { Features features = 1; }
//   Features { map<string, Feature> feature = 1; }   (map entry: { key = 1; value = 2; })
//   Feature  { oneof kind { BytesList bytes_list = 1; FloatList float_list = 2;
//                           Int64List int64_list = 3; } }
//   BytesList { repeated bytes value = 1; }  FloatList { repeated float value = 1 [packed]; }
//   Int64List { repeated int64 value = 1 [packed]; }
//
// The decoder follows protobuf's parsing rules, so it reads anything a protobuf library writes:
// packed and unpacked repeated numbers, fields in any order, unknown fields of every wire type
// skipped, repeated sub-messages merged (a later map entry with the same key replaces the
// earlier one; within a Feature the last kind set wins, as for any oneof). It checks every
// varint, length and wire type against the buffer and throws crest::Error (input) naming the
// caller's context (file and record), the feature and the defect. Bytes values are not copied:
// they are spans into the record, valid while the record buffer is.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace crest {

struct ExampleFeature {
  // `none`: a Feature message with no list set (valid protobuf, carries no values).
  enum class Kind { bytes, floats, int64s, none };
  Kind kind = Kind::none;
  std::vector<std::span<const std::byte>> bytes;  // views into the parsed record
  std::vector<float> floats;
  std::vector<int64_t> int64s;

  size_t size() const;  // number of values of its kind
};

const char* example_kind_name(ExampleFeature::Kind kind);  // "bytes_list", "float_list", ...

class ExampleView {
 public:
  // Parses `record`; the result refers into it for bytes values. `context` prefixes every error
  // (e.g. "data/x.tfrecord: record 0").
  static ExampleView parse(std::span<const std::byte> record, const std::string& context);

  const ExampleFeature* find(std::string_view name) const;  // nullptr when absent
  // The feature `name`, which must be of kind `expected`; otherwise throws crest::Error (input)
  // naming the context, the feature, the expected and the found kind (or that it is missing).
  const ExampleFeature& at(std::string_view name, ExampleFeature::Kind expected) const;
  std::vector<std::string> names() const;  // sorted
  size_t size() const { return features_.size(); }
  const std::string& context() const { return context_; }

 private:
  std::string context_;
  std::vector<std::pair<std::string, ExampleFeature>> features_;  // sorted by name
};

// Builds an Example. Features are encoded in sorted key order (what protobuf's deterministic
// map serialisation does), numbers packed, so equal content gives equal bytes. Bytes values are
// held as views: the caller keeps them alive until encode() (a 16 MiB volume is copied once,
// into the encoding). Adding a name twice throws crest::Error (input).
class ExampleBuilder {
 public:
  ExampleBuilder& add_bytes(const std::string& name, std::span<const std::byte> value);
  ExampleBuilder& add_bytes_list(const std::string& name,
                                 std::vector<std::span<const std::byte>> values);
  ExampleBuilder& add_floats(const std::string& name, std::span<const float> values);
  ExampleBuilder& add_int64s(const std::string& name, std::span<const int64_t> values);

  size_t encoded_size() const;
  std::vector<std::byte> encode() const;
  // Encodes into `out` (resized), reusing its capacity.
  void encode_into(std::vector<std::byte>& out) const;

 private:
  ExampleFeature& add(const std::string& name, ExampleFeature::Kind kind);
  std::vector<std::pair<std::string, ExampleFeature>> features_;  // kept sorted by name
};

}  // namespace crest
