#include "crest/models/model_registry.hpp"

#include "crest/core/name_registry.hpp"

namespace crest {
namespace {

NameRegistry<ModelKind>& registry() {
  static NameRegistry<ModelKind> models("model");  // built during static initialisation
  return models;
}

}  // namespace

std::string model_list_text(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

void check_image_input_shape(const std::vector<int64_t>& s) {
  if (s.size() != 3)
    throw ModelKeyError("input_shape", "expected 3 entries [H, W, C], got " + model_list_text(s));
  if (s[2] < 1 || s[2] > 4096)
    throw ModelKeyError("input_shape",
                        "channel count must be in [1, 4096], got " + model_list_text(s));
}

bool register_model_kind(ModelKind kind) {
  const std::string name = kind.name;
  return registry().add(name, std::move(kind));
}

const ModelKind* find_model_kind_or_null(const std::string& name) { return registry().find(name); }

const ModelKind& find_model_kind(const std::string& name) { return registry().at(name); }

std::vector<std::string> model_names() { return registry().names(); }

}  // namespace crest
