#include "crest/models/model_registry.hpp"

#include "crest/core/name_registry.hpp"

namespace crest {
namespace {

NameRegistry<ModelKind>& registry() {
  static NameRegistry<ModelKind> models("model");  // built during static initialisation
  return models;
}

}  // namespace

bool register_model_kind(ModelKind kind) {
  const std::string name = kind.name;
  return registry().add(name, std::move(kind));
}

const ModelKind* find_model_kind_or_null(const std::string& name) { return registry().find(name); }

const ModelKind& find_model_kind(const std::string& name) { return registry().at(name); }

std::vector<std::string> model_names() { return registry().names(); }

}  // namespace crest
