#include "crest/train/dataset_registry.hpp"

#include "crest/core/name_registry.hpp"

namespace crest {
namespace {

NameRegistry<DatasetType>& registry() {
  static NameRegistry<DatasetType> datasets("dataset");  // built during static initialisation
  return datasets;
}

}  // namespace

bool register_dataset_type(DatasetType type) {
  const std::string name = type.name;
  return registry().add(name, std::move(type));
}

const DatasetType& find_dataset_type(const std::string& name) { return registry().at(name); }

const DatasetType* find_dataset_type_or_null(const std::string& name) {
  return registry().find(name);
}

std::vector<std::string> dataset_names() { return registry().names(); }

}  // namespace crest
