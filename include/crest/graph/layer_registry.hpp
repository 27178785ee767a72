// The layer registry: layer kind name -> its attributes and how to make a Layer from them.
// Each layer file registers its kinds with one line:
//
//   CREST_REGISTER_LAYER(conv, layer_kind<ConvLayer>("conv", conv_fields()));
//
// so a graph node (kind + attributes) can come from C++ helpers or from YAML, and compile()
// makes a fresh Layer for every node each time it compiles a graph.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "crest/core/enum_table.hpp"
#include "crest/core/error.hpp"
#include "crest/graph/attributes.hpp"
#include "crest/graph/layer.hpp"

namespace crest {

// A node's layer as data: the registered kind and its attributes.
struct LayerSpec {
  std::string kind;
  Attributes attrs;
  bool operator==(const LayerSpec& o) const = default;
};

// One attribute of an options struct S: its key, type, and how it is read into and written
// from S. Built by attr_field() from a member pointer.
template <typename S>
struct AttrField {
  std::string key;
  AttrType type;
  std::function<void(S&, const AttrValue&)> read;  // the value has `type` already
  std::function<AttrValue(const S&)> write;
};

namespace attr_detail {

template <typename M>
struct Codec;
template <>
struct Codec<bool> {
  static constexpr AttrType type = AttrType::boolean;
  static bool get(const AttrValue& v) { return std::get<bool>(v); }
  static AttrValue put(bool m) { return m; }
};
template <>
struct Codec<int64_t> {
  static constexpr AttrType type = AttrType::integer;
  static int64_t get(const AttrValue& v) { return std::get<int64_t>(v); }
  static AttrValue put(int64_t m) { return m; }
};
template <>
struct Codec<int> {
  static constexpr AttrType type = AttrType::integer;
  static int get(const AttrValue& v) { return static_cast<int>(std::get<int64_t>(v)); }
  static AttrValue put(int m) { return int64_t{m}; }
};
template <>
struct Codec<double> {
  static constexpr AttrType type = AttrType::number;
  static double get(const AttrValue& v) { return std::get<double>(v); }
  static AttrValue put(double m) { return m; }
};
template <>
struct Codec<float> {
  static constexpr AttrType type = AttrType::number;
  static float get(const AttrValue& v) { return static_cast<float>(std::get<double>(v)); }
  static AttrValue put(float m) { return static_cast<double>(m); }
};
template <>
struct Codec<std::vector<int64_t>> {
  static constexpr AttrType type = AttrType::integers;
  static std::vector<int64_t> get(const AttrValue& v) { return std::get<std::vector<int64_t>>(v); }
  static AttrValue put(const std::vector<int64_t>& m) { return m; }
};
template <>
struct Codec<std::vector<float>> {
  static constexpr AttrType type = AttrType::numbers;
  static std::vector<float> get(const AttrValue& v) {
    const auto& d = std::get<std::vector<double>>(v);
    return std::vector<float>(d.begin(), d.end());
  }
  static AttrValue put(const std::vector<float>& m) {
    return std::vector<double>(m.begin(), m.end());
  }
};

}  // namespace attr_detail

// attr_field("kernel", &ConvOptions::kernel). Enum members are written by their kEnumTable name.
template <typename S, typename M>
AttrField<S> attr_field(std::string key, M S::*member) {
  if constexpr (std::is_enum_v<M>) {
    return {key, AttrType::text,
            [member, key](S& s, const AttrValue& v) {
              s.*member = parse_enum<M>(std::get<std::string>(v), key);
            },
            [member](const S& s) -> AttrValue { return enum_name(s.*member); }};
  } else {
    using C = attr_detail::Codec<M>;
    return {key, C::type, [member](S& s, const AttrValue& v) { s.*member = C::get(v); },
            [member](const S& s) { return C::put(s.*member); }};
  }
}

struct AttrKey {
  std::string key;
  AttrType type;
};

struct LayerKind {
  std::string name;
  std::vector<AttrKey> keys;
  // Every key, defaults filled in, values converted to their key's type (an integer where a
  // number is wanted). Throws crest::Error (input) naming the key that is unknown or wrong.
  std::function<Attributes(const Attributes&)> canonical;
  // A fresh, uncompiled layer from canonical attributes.
  std::function<std::unique_ptr<Layer>(const Attributes&)> make;
};

// Converts `v` to `want` where that loses nothing (integer -> number, integer list -> number
// list); throws crest::Error (input) naming `key` otherwise.
AttrValue coerce_attr(const AttrValue& v, AttrType want, const std::string& key);

// A kind whose layer L is constructed from an options struct O described by `fields`. `fix`
// runs after the attributes are read (a kind that pins an option, e.g. conv_transpose).
template <typename L, typename O>
LayerKind layer_kind(const std::string& name, std::vector<AttrField<O>> fields,
                     std::function<void(O&)> fix = {}) {
  LayerKind k;
  k.name = name;
  for (const auto& f : fields) k.keys.push_back({f.key, f.type});
  auto read = [name, fields, fix](const Attributes& attrs) {
    O o{};
    for (const auto& [key, value] : attrs.items()) {
      const AttrField<O>* f = nullptr;
      for (const auto& candidate : fields)
        if (candidate.key == key) f = &candidate;
      if (!f) {
        std::string known;
        for (const auto& c : fields) known += (known.empty() ? "" : ", ") + c.key;
        throw_input("unknown attribute '" + key + "' (" + name +
                    " accepts: " + (known.empty() ? "none" : known) + ")");
      }
      f->read(o, coerce_attr(value, f->type, key));
    }
    if (fix) fix(o);
    return o;
  };
  k.canonical = [read, fields](const Attributes& attrs) {
    const O o = read(attrs);
    [[maybe_unused]] const L check(o);  // the layer's own checks, at graph-building time
    Attributes out;
    for (const auto& f : fields) out.set(f.key, f.write(o));
    return out;
  };
  k.make = [read](const Attributes& attrs) -> std::unique_ptr<Layer> {
    return std::make_unique<L>(read(attrs));
  };
  return k;
}

// A kind without attributes whose layer is default-constructed (add, flatten, mse_loss).
template <typename L>
LayerKind layer_kind(const std::string& name) {
  LayerKind k;
  k.name = name;
  k.canonical = [name](const Attributes& attrs) {
    if (!attrs.empty())
      throw_input("unknown attribute '" + attrs.items().begin()->first + "' (" + name +
                  " takes none)");
    return Attributes{};
  };
  k.make = [](const Attributes&) -> std::unique_ptr<Layer> { return std::make_unique<L>(); };
  return k;
}

// Writes an options struct as a LayerSpec of `kind` (the C++ builder helpers use this).
template <typename O>
LayerSpec layer_spec(const std::string& kind, const std::vector<AttrField<O>>& fields, const O& o) {
  LayerSpec s{kind, {}};
  for (const auto& f : fields) s.attrs.set(f.key, f.write(o));
  return s;
}

bool register_layer_kind(LayerKind kind);
// Throws crest::Error (input) listing the registered kinds when `name` is unknown.
const LayerKind& find_layer_kind(const std::string& name);
std::vector<std::string> layer_kind_names();

#define CREST_REGISTER_LAYER(id, ...)                              \
  [[maybe_unused]] static const bool crest_layer_registered_##id = \
      ::crest::register_layer_kind(__VA_ARGS__)

}  // namespace crest
