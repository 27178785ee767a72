#include "crest/data/data_family.hpp"

#include "crest/core/name_registry.hpp"

namespace crest {
namespace {

NameRegistry<DataFamily>& registry() {
  static NameRegistry<DataFamily> families("data family");  // filled at static initialisation
  return families;
}

}  // namespace

bool register_data_family(DataFamily family) {
  const std::string name = family.name;
  return registry().add(name, std::move(family));
}

const DataFamily& find_data_family(const std::string& name) {
  if (const DataFamily* f = registry().find(name)) return *f;
  throw_usage("unknown data family '" + name + "' (registered: " + join_names(data_family_names()) +
              ")");
}

std::vector<std::string> data_family_names() { return registry().names(); }

}  // namespace crest
