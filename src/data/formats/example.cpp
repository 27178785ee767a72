#include "crest/data/formats/example.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <map>

#include "crest/core/error.hpp"

namespace crest {

namespace {

enum WireType : uint32_t {
  kVarint = 0,
  kFixed64 = 1,
  kLengthDelimited = 2,
  kStartGroup = 3,
  kEndGroup = 4,
  kFixed32 = 5,
};

const char* wire_type_name(uint32_t wt) {
  switch (wt) {
    case kVarint:
      return "varint";
    case kFixed64:
      return "fixed64";
    case kLengthDelimited:
      return "length-delimited";
    case kStartGroup:
      return "start-group";
    case kEndGroup:
      return "end-group";
    case kFixed32:
      return "fixed32";
  }
  return "invalid";
}

// Groups are a deprecated proto2 feature we only skip; the bound stops a hostile record from
// recursing the stack away.
constexpr int kMaxGroupDepth = 64;

struct Tag {
  uint32_t field = 0;
  uint32_t wire_type = 0;
  const std::byte* at = nullptr;  // where the tag starts, for error offsets
};

// Reads protobuf wire format from [p, end) and turns every defect into one error message.
class WireReader {
 public:
  WireReader(std::span<const std::byte> bytes, const std::byte* base, const std::string& context,
             std::string scope)
      : p_(bytes.data()),
        end_(bytes.data() + bytes.size()),
        base_(base),
        context_(context),
        scope_(std::move(scope)) {}

  bool done() const { return p_ == end_; }
  const std::string& scope() const { return scope_; }

  [[noreturn]] void fail(const std::byte* at, const std::string& what) const {
    throw_input(context_ + ": malformed tf.train.Example: " + scope_ + ": " + what +
                " (at byte offset " + std::to_string(at - base_) + ")");
  }

  uint64_t varint(const char* what) {
    const std::byte* start = p_;
    uint64_t v = 0;
    for (int i = 0; i < 10; ++i) {
      if (p_ == end_) fail(start, std::string("truncated varint (") + what + ")");
      const auto b = std::to_integer<uint64_t>(*p_++);
      v |= (b & 0x7f) << (7 * i);  // bits past 64 in the 10th byte are dropped, as protobuf does
      if (!(b & 0x80)) return v;
    }
    fail(start, std::string("varint longer than 10 bytes (") + what + ")");
  }

  Tag tag() {
    Tag t;
    t.at = p_;
    const uint64_t key = varint("field tag");
    t.wire_type = static_cast<uint32_t>(key & 7);
    const uint64_t field = key >> 3;
    if (field == 0) fail(t.at, "field number 0 is invalid");
    if (field > 0x1fffffff) fail(t.at, "field number " + std::to_string(field) + " is too large");
    if (t.wire_type > kFixed32)
      fail(t.at, "invalid wire type " + std::to_string(t.wire_type) + " for field " +
                     std::to_string(field));
    t.field = static_cast<uint32_t>(field);
    return t;
  }

  std::span<const std::byte> length_delimited(const char* what) {
    const std::byte* start = p_;
    const uint64_t n = varint(what);
    const auto left = static_cast<uint64_t>(end_ - p_);
    if (n > left)
      fail(start, std::string(what) + ": length " + std::to_string(n) + " runs past the end (" +
                      std::to_string(left) + " bytes left)");
    std::span<const std::byte> out(p_, static_cast<size_t>(n));
    p_ += n;
    return out;
  }

  const std::byte* fixed(size_t n, const char* what) {
    if (static_cast<size_t>(end_ - p_) < n)
      fail(p_, std::string("truncated ") + what + " (" + std::to_string(n) + " bytes needed, " +
                   std::to_string(end_ - p_) + " left)");
    const std::byte* at = p_;
    p_ += n;
    return at;
  }

  void expect(const Tag& t, uint32_t wire_type, const char* field_name) const {
    if (t.wire_type != wire_type)
      fail(t.at, std::string("field ") + std::to_string(t.field) + " (" + field_name +
                     ") has wire type " + wire_type_name(t.wire_type) + ", expected " +
                     wire_type_name(wire_type));
  }

  // Skips a field this decoder does not know, of any wire type.
  void skip(const Tag& t, int depth = 0) {
    switch (t.wire_type) {
      case kVarint:
        (void)varint("unknown varint field");
        return;
      case kFixed64:
        (void)fixed(8, "unknown fixed64 field");
        return;
      case kFixed32:
        (void)fixed(4, "unknown fixed32 field");
        return;
      case kLengthDelimited:
        (void)length_delimited("unknown length-delimited field");
        return;
      case kStartGroup: {
        if (depth >= kMaxGroupDepth) fail(t.at, "groups nested too deeply");
        for (;;) {
          if (done()) fail(t.at, "group of field " + std::to_string(t.field) + " is never closed");
          const Tag inner = tag();
          if (inner.wire_type == kEndGroup) {
            if (inner.field != t.field)
              fail(inner.at, "end-group for field " + std::to_string(inner.field) +
                                 " closes the group of field " + std::to_string(t.field));
            return;
          }
          skip(inner, depth + 1);
        }
      }
      case kEndGroup:
        fail(t.at, "end-group without a matching start-group");
    }
    fail(t.at, "invalid wire type");
  }

  WireReader sub(std::span<const std::byte> bytes, std::string scope) const {
    return WireReader(bytes, base_, context_, std::move(scope));
  }

 private:
  const std::byte* p_;
  const std::byte* end_;
  const std::byte* base_;
  const std::string& context_;
  std::string scope_;
};

float load_float_le(const std::byte* p) {
  uint32_t bits;
  std::memcpy(&bits, p, 4);
  if constexpr (std::endian::native == std::endian::big) bits = __builtin_bswap32(bits);
  return std::bit_cast<float>(bits);
}

void parse_bytes_list(WireReader r, ExampleFeature& f) {
  while (!r.done()) {
    const Tag t = r.tag();
    if (t.field != 1) {
      r.skip(t);
      continue;
    }
    r.expect(t, kLengthDelimited, "BytesList.value");
    f.bytes.push_back(r.length_delimited("BytesList.value"));
  }
}

void parse_float_list(WireReader r, ExampleFeature& f) {
  while (!r.done()) {
    const Tag t = r.tag();
    if (t.field != 1) {
      r.skip(t);
      continue;
    }
    if (t.wire_type == kFixed32) {  // unpacked: one value per field
      f.floats.push_back(load_float_le(r.fixed(4, "float")));
      continue;
    }
    r.expect(t, kLengthDelimited, "FloatList.value");
    const auto packed = r.length_delimited("packed FloatList.value");
    if (packed.size() % 4 != 0)
      r.fail(t.at, "packed float list of " + std::to_string(packed.size()) +
                       " bytes is not a multiple of 4");
    const size_t old = f.floats.size();
    f.floats.resize(old + packed.size() / 4);
    for (size_t i = 0; i < packed.size() / 4; ++i)
      f.floats[old + i] = load_float_le(packed.data() + 4 * i);
  }
}

void parse_int64_list(WireReader r, ExampleFeature& f) {
  while (!r.done()) {
    const Tag t = r.tag();
    if (t.field != 1) {
      r.skip(t);
      continue;
    }
    if (t.wire_type == kVarint) {  // unpacked
      f.int64s.push_back(static_cast<int64_t>(r.varint("int64")));
      continue;
    }
    r.expect(t, kLengthDelimited, "Int64List.value");
    const auto packed = r.length_delimited("packed Int64List.value");
    // Every varint ends in exactly one byte below 0x80: that counts the values before parsing.
    const auto count =
        static_cast<size_t>(std::count_if(packed.begin(), packed.end(), [](std::byte b) {
          return (b & std::byte{0x80}) == std::byte{0};
        }));
    f.int64s.reserve(f.int64s.size() + count);
    WireReader values = r.sub(packed, r.scope() + ": packed Int64List");
    while (!values.done()) f.int64s.push_back(static_cast<int64_t>(values.varint("int64")));
  }
}

// Switching to another member of the oneof discards the values of the previous one.
void set_kind(ExampleFeature& f, ExampleFeature::Kind kind) {
  if (f.kind == kind) return;
  f = ExampleFeature{};
  f.kind = kind;
}

void parse_feature(WireReader r, ExampleFeature& f) {
  while (!r.done()) {
    const Tag t = r.tag();
    static constexpr const char* kNames[] = {"", "Feature.bytes_list", "Feature.float_list",
                                             "Feature.int64_list"};
    if (t.field < 1 || t.field > 3) {
      r.skip(t);
      continue;
    }
    r.expect(t, kLengthDelimited, kNames[t.field]);
    const auto body = r.length_delimited(kNames[t.field]);
    if (t.field == 1) {
      set_kind(f, ExampleFeature::Kind::bytes);
      parse_bytes_list(r.sub(body, r.scope()), f);
    } else if (t.field == 2) {
      set_kind(f, ExampleFeature::Kind::floats);
      parse_float_list(r.sub(body, r.scope()), f);
    } else {
      set_kind(f, ExampleFeature::Kind::int64s);
      parse_int64_list(r.sub(body, r.scope()), f);
    }
  }
}

using FeatureMap = std::map<std::string, ExampleFeature, std::less<>>;

void parse_map_entry(WireReader r, FeatureMap& out) {
  // Protobuf allows the value before the key, so the value is parsed once the key is known.
  std::string key;
  std::vector<std::span<const std::byte>> values;
  while (!r.done()) {
    const Tag t = r.tag();
    if (t.field == 1) {
      r.expect(t, kLengthDelimited, "map key");
      const auto k = r.length_delimited("map key");
      key.assign(reinterpret_cast<const char*>(k.data()), k.size());
    } else if (t.field == 2) {
      r.expect(t, kLengthDelimited, "map value");
      values.push_back(r.length_delimited("map value"));
    } else {
      r.skip(t);
    }
  }
  ExampleFeature f;
  for (const auto& v : values) parse_feature(r.sub(v, "feature \"" + key + "\""), f);
  out.insert_or_assign(std::move(key), std::move(f));  // a repeated key: the last entry wins
}

void parse_features(WireReader r, FeatureMap& out) {
  while (!r.done()) {
    const Tag t = r.tag();
    if (t.field != 1) {
      r.skip(t);
      continue;
    }
    r.expect(t, kLengthDelimited, "Features.feature");
    parse_map_entry(r.sub(r.length_delimited("Features.feature map entry"), "Features map entry"),
                    out);
  }
}

// ---- encoding ----

size_t varint_size(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

size_t field_size(size_t payload) { return 1 + varint_size(payload) + payload; }

std::byte* put_varint(std::byte* p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<std::byte>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<std::byte>(v);
  return p;
}

// Tag byte for fields 1..15 (all this encoder writes) plus the length prefix.
std::byte* put_header(std::byte* p, uint32_t field, uint32_t wire_type, size_t length) {
  *p++ = static_cast<std::byte>((field << 3) | wire_type);
  return put_varint(p, length);
}

size_t int64_payload(const ExampleFeature& f) {
  size_t n = 0;
  for (int64_t v : f.int64s) n += varint_size(static_cast<uint64_t>(v));
  return n;
}

// Size of the list message inside a Feature. Empty packed fields are omitted, as protobuf does.
size_t list_size(const ExampleFeature& f) {
  switch (f.kind) {
    case ExampleFeature::Kind::bytes: {
      size_t n = 0;
      for (const auto& b : f.bytes) n += field_size(b.size());
      return n;
    }
    case ExampleFeature::Kind::floats:
      return f.floats.empty() ? 0 : field_size(4 * f.floats.size());
    case ExampleFeature::Kind::int64s:
      return f.int64s.empty() ? 0 : field_size(int64_payload(f));
    case ExampleFeature::Kind::none:
      return 0;
  }
  return 0;
}

size_t feature_size(const ExampleFeature& f) {
  return f.kind == ExampleFeature::Kind::none ? 0 : field_size(list_size(f));
}

size_t entry_size(const std::string& key, const ExampleFeature& f) {
  return field_size(key.size()) + field_size(feature_size(f));
}

}  // namespace

size_t ExampleFeature::size() const {
  switch (kind) {
    case Kind::bytes:
      return bytes.size();
    case Kind::floats:
      return floats.size();
    case Kind::int64s:
      return int64s.size();
    case Kind::none:
      return 0;
  }
  return 0;
}

const char* example_kind_name(ExampleFeature::Kind kind) {
  switch (kind) {
    case ExampleFeature::Kind::bytes:
      return "bytes_list";
    case ExampleFeature::Kind::floats:
      return "float_list";
    case ExampleFeature::Kind::int64s:
      return "int64_list";
    case ExampleFeature::Kind::none:
      return "empty feature (no list set)";
  }
  return "?";
}

ExampleView ExampleView::parse(std::span<const std::byte> record, const std::string& context) {
  WireReader r(record, record.data(), context, "Example");
  FeatureMap features;
  while (!r.done()) {
    const Tag t = r.tag();
    if (t.field != 1) {
      r.skip(t);
      continue;
    }
    r.expect(t, kLengthDelimited, "Example.features");
    parse_features(r.sub(r.length_delimited("Example.features"), "Features"), features);
  }
  ExampleView view;
  view.context_ = context;
  view.features_.reserve(features.size());
  for (auto& [name, f] : features) view.features_.emplace_back(name, std::move(f));
  return view;
}

const ExampleFeature* ExampleView::find(std::string_view name) const {
  const auto it = std::lower_bound(features_.begin(), features_.end(), name,
                                   [](const auto& e, std::string_view n) { return e.first < n; });
  return it != features_.end() && it->first == name ? &it->second : nullptr;
}

const ExampleFeature& ExampleView::at(std::string_view name, ExampleFeature::Kind expected) const {
  const ExampleFeature* f = find(name);
  if (!f) {
    std::string have;
    for (const auto& [n, unused] : features_) have += (have.empty() ? "" : ", ") + n;
    throw_input(context_ + ": tf.train.Example has no feature \"" + std::string(name) +
                "\" (expected a " + example_kind_name(expected) +
                "; it has: " + (have.empty() ? "no features" : have) + ")");
  }
  if (f->kind != expected)
    throw_input(context_ + ": tf.train.Example feature \"" + std::string(name) + "\" is a " +
                example_kind_name(f->kind) + ", expected a " + example_kind_name(expected));
  return *f;
}

std::vector<std::string> ExampleView::names() const {
  std::vector<std::string> out;
  out.reserve(features_.size());
  for (const auto& [n, unused] : features_) out.push_back(n);
  return out;
}

ExampleFeature& ExampleBuilder::add(const std::string& name, ExampleFeature::Kind kind) {
  const auto it = std::lower_bound(features_.begin(), features_.end(), name,
                                   [](const auto& e, const std::string& n) { return e.first < n; });
  if (it != features_.end() && it->first == name)
    throw_input("tf.train.Example: feature \"" + name + "\" added twice");
  auto& entry = *features_.emplace(it, name, ExampleFeature{});
  entry.second.kind = kind;
  return entry.second;
}

ExampleBuilder& ExampleBuilder::add_bytes(const std::string& name,
                                          std::span<const std::byte> value) {
  add(name, ExampleFeature::Kind::bytes).bytes.push_back(value);
  return *this;
}

ExampleBuilder& ExampleBuilder::add_bytes_list(const std::string& name,
                                               std::vector<std::span<const std::byte>> values) {
  add(name, ExampleFeature::Kind::bytes).bytes = std::move(values);
  return *this;
}

ExampleBuilder& ExampleBuilder::add_floats(const std::string& name, std::span<const float> values) {
  add(name, ExampleFeature::Kind::floats).floats.assign(values.begin(), values.end());
  return *this;
}

ExampleBuilder& ExampleBuilder::add_int64s(const std::string& name,
                                           std::span<const int64_t> values) {
  add(name, ExampleFeature::Kind::int64s).int64s.assign(values.begin(), values.end());
  return *this;
}

size_t ExampleBuilder::encoded_size() const {
  size_t features = 0;
  for (const auto& [name, f] : features_) features += field_size(entry_size(name, f));
  return field_size(features);
}

std::vector<std::byte> ExampleBuilder::encode() const {
  std::vector<std::byte> out;
  encode_into(out);
  return out;
}

void ExampleBuilder::encode_into(std::vector<std::byte>& out) const {
  size_t features = 0;
  for (const auto& [name, f] : features_) features += field_size(entry_size(name, f));
  out.resize(field_size(features));
  std::byte* p = put_header(out.data(), 1, kLengthDelimited, features);  // Example.features
  for (const auto& [name, f] : features_) {
    p = put_header(p, 1, kLengthDelimited, entry_size(name, f));  // Features.feature entry
    p = put_header(p, 1, kLengthDelimited, name.size());          // key
    if (!name.empty()) std::memcpy(p, name.data(), name.size());
    p += name.size();
    p = put_header(p, 2, kLengthDelimited, feature_size(f));  // value: Feature
    if (f.kind == ExampleFeature::Kind::none) continue;
    const uint32_t kind_field = f.kind == ExampleFeature::Kind::bytes    ? 1
                                : f.kind == ExampleFeature::Kind::floats ? 2
                                                                         : 3;
    p = put_header(p, kind_field, kLengthDelimited, list_size(f));
    switch (f.kind) {
      case ExampleFeature::Kind::bytes:
        for (const auto& b : f.bytes) {
          p = put_header(p, 1, kLengthDelimited, b.size());
          if (!b.empty()) std::memcpy(p, b.data(), b.size());
          p += b.size();
        }
        break;
      case ExampleFeature::Kind::floats:
        if (f.floats.empty()) break;
        p = put_header(p, 1, kLengthDelimited, 4 * f.floats.size());
        for (float v : f.floats) {
          uint32_t bits = std::bit_cast<uint32_t>(v);
          if constexpr (std::endian::native == std::endian::big) bits = __builtin_bswap32(bits);
          std::memcpy(p, &bits, 4);
          p += 4;
        }
        break;
      case ExampleFeature::Kind::int64s:
        if (f.int64s.empty()) break;
        p = put_header(p, 1, kLengthDelimited, int64_payload(f));
        for (int64_t v : f.int64s) p = put_varint(p, static_cast<uint64_t>(v));
        break;
      case ExampleFeature::Kind::none:
        break;
    }
  }
  CREST_CHECK(p == out.data() + out.size(), "tf.train.Example size computation disagrees");
}

}  // namespace crest
