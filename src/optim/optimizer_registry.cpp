#include "crest/optim/optimizer_registry.hpp"

#include <algorithm>

#include "crest/core/name_registry.hpp"

namespace crest {
namespace {

NameRegistry<OptimizerType>& registry() {
  static NameRegistry<OptimizerType> optimizers("optimizer");  // built during static initialisation
  return optimizers;
}

bool contains(const std::vector<std::string>& keys, const std::string& key) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

}  // namespace

bool register_optimizer_type(OptimizerType type) {
  const std::string name = type.name;
  return registry().add(name, std::move(type));
}

const OptimizerType* find_optimizer_type_or_null(const std::string& name) {
  return registry().find(name);
}

const OptimizerType& find_optimizer_type(const std::string& name) { return registry().at(name); }

std::string registered_optimizer_spelling(const std::string& text) {
  for (const auto& name : optimizer_names())
    if (fold_spelling(name) == fold_spelling(text)) return name;
  return {};
}

std::vector<std::string> optimizer_names() { return registry().names(); }

bool OptimizerConfig::takes(const std::string& key) const {
  const OptimizerType* type = find_optimizer_type_or_null(name);
  if (!type) return false;
  if (contains(type->keys, key)) return true;
  if (!type->wraps) return false;
  const OptimizerType* base = find_optimizer_type_or_null(larc_base);
  return base && contains(base->keys_when_wrapped, key);
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config) {
  return find_optimizer_type(config.name).make(config);
}

std::vector<LoggedEntry> optimizer_parameter_group(const OptimizerConfig& config, double lr) {
  return find_optimizer_type(config.name).parameter_group(config, lr);
}

double optimizer_default_lr(const OptimizerConfig& config) {
  const OptimizerType& type = find_optimizer_type(config.name);
  return type.wraps ? find_optimizer_type(config.larc_base).default_lr : type.default_lr;
}

std::string optimizers_taking(const std::string& key) {
  std::vector<std::string> names;
  for (const auto& name : optimizer_names()) {
    const OptimizerType& type = find_optimizer_type(name);
    if (contains(type.keys, key)) names.push_back(name);
    if (!type.wraps) continue;
    for (const auto& base : optimizer_names()) {
      const OptimizerType& b = find_optimizer_type(base);
      if (b.wrappable && contains(b.keys_when_wrapped, key))
        names.push_back(name + " over " + base);
    }
  }
  std::sort(names.begin(), names.end());
  return join_names(names);
}

}  // namespace crest
