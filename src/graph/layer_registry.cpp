#include "crest/graph/layer_registry.hpp"

#include <map>

namespace crest {
namespace {

std::map<std::string, LayerKind>& registry() {
  static std::map<std::string, LayerKind> kinds;  // built during static initialisation
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
  CREST_CHECK(registry().emplace(name, std::move(kind)).second,
              "layer kind '" + name + "' registered twice");
  return true;
}

const LayerKind& find_layer_kind(const std::string& name) {
  auto it = registry().find(name);
  if (it == registry().end()) {
    std::string known;
    for (const auto& n : layer_kind_names()) known += (known.empty() ? "" : ", ") + n;
    throw_input("unknown layer kind '" + name + "' (known: " + known + ")");
  }
  return it->second;
}

std::vector<std::string> layer_kind_names() {
  std::vector<std::string> names;
  for (const auto& [name, kind] : registry()) names.push_back(name);
  return names;
}

}  // namespace crest
