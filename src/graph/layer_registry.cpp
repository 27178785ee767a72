#include "crest/graph/layer_registry.hpp"

#include "crest/core/name_registry.hpp"

namespace crest {
namespace {

NameRegistry<LayerKind>& registry() {
  static NameRegistry<LayerKind> kinds("layer kind");  // built during static initialisation
  return kinds;
}

}  // namespace

AttrValue coerce_attr(const AttrValue& v, AttrType want, const std::string& key) {
  const AttrType have = attr_type_of(v);
  if (have == want) return v;
  if (have == AttrType::integer && want == AttrType::number)
    return static_cast<double>(std::get<int64_t>(v));
  if (have == AttrType::integers && want == AttrType::numbers) {
    const auto& l = std::get<std::vector<int64_t>>(v);
    return std::vector<double>(l.begin(), l.end());
  }
  throw_input("attribute '" + key + "' must be " +
              std::string(want == AttrType::integer ? "an " : "a ") + attr_type_name(want) +
              ", got " + attr_text(v) + " (a " + attr_type_name(have) + ")");
}

bool register_layer_kind(LayerKind kind) {
  const std::string name = kind.name;
  return registry().add(name, std::move(kind));
}

const LayerKind& find_layer_kind(const std::string& name) { return registry().at(name); }

std::vector<std::string> layer_kind_names() { return registry().names(); }

}  // namespace crest
