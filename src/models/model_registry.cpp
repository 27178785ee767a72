#include "crest/models/model_registry.hpp"

#include <map>

namespace crest {
namespace {

std::map<std::string, ModelKind>& registry() {
  static std::map<std::string, ModelKind> models;  // built during static initialisation
  return models;
}

}  // namespace

bool register_model_kind(ModelKind kind) {
  const std::string name = kind.name;
  CREST_CHECK(registry().emplace(name, std::move(kind)).second,
              "model '" + name + "' registered twice");
  return true;
}

const ModelKind* find_model_kind_or_null(const std::string& name) {
  const auto it = registry().find(name);
  return it == registry().end() ? nullptr : &it->second;
}

const ModelKind& find_model_kind(const std::string& name) {
  if (const ModelKind* k = find_model_kind_or_null(name)) return *k;
  std::string known;
  for (const auto& n : model_names()) known += (known.empty() ? "" : ", ") + n;
  throw_input("unknown model '" + name + "' (registered: " + known + ")");
}

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const auto& [name, kind] : registry()) names.push_back(name);
  return names;
}

}  // namespace crest
