// The model registry: model name -> the keys of its config section and how to build it. Each
// model file registers itself with one line:
//
//   CREST_REGISTER_MODEL(cosmoflow, model_kind<CosmoFlowOptions>("cosmoflow", fields, reference,
//                                                                 check, build));
//
// so `model: {name: cosmoflow, ...}` in a run config is read, checked, printed and built from
// the model's own field table (the AttrField tables layers use), and the config loader knows no
// model by name.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "crest/core/error.hpp"
#include "crest/graph/layer_registry.hpp"
#include "crest/models/built_model.hpp"

namespace crest {

// A bad value of one key of a model's section. The config loader catches it to name the file and
// line of the key; anywhere else its message names the key path.
class ModelKeyError : public Error {
 public:
  ModelKeyError(std::string key, std::string message)
      : Error(ErrorKind::input, "model." + key + ": " + message),
        key_(std::move(key)),
        message_(std::move(message)) {}
  const std::string& key() const { return key_; }
  const std::string& message() const { return message_; }

 private:
  std::string key_, message_;
};

// "[a, b, c]": a list value as a ModelKeyError's message shows it.
std::string model_list_text(const std::vector<int64_t>& v);

// An image model's input_shape [H, W, C]: three entries, 1 to 4096 channels; else a
// ModelKeyError naming input_shape. What the spatial extents must divide by is the model's.
void check_image_input_shape(const std::vector<int64_t>& s);

struct ModelKind {
  std::string name;
  std::vector<AttrKey> keys;  // the section's keys besides `name`, in the order printed
  // Every key, defaults filled in, from the given ones (each already of its key's type). Throws
  // ModelKeyError naming the key that is unknown or has an impossible value.
  std::function<Attributes(const Attributes&)> canonical;
  // The network from canonical attributes.
  std::function<BuiltModel(const Attributes&)> build;
  // The registered optimizer its reference trains with (crest bench train's default):
  // CosmoFlow's Keras SGD, DeepCAM's LAMB.
  std::string reference_optimizer = "SGD";
};

// Options O from `attrs` over `defaults`, each error a ModelKeyError naming its key.
template <typename O>
O read_model_options(const std::vector<AttrField<O>>& fields, const O& defaults,
                     const Attributes& attrs) {
  O o = defaults;
  for (const auto& [key, value] : attrs.items()) {
    const AttrField<O>* f = nullptr;
    for (const auto& candidate : fields)
      if (candidate.key == key) f = &candidate;
    if (!f) throw ModelKeyError(key, "unknown key");
    try {
      f->read(o, coerce_attr(value, f->type, key));
    } catch (const ModelKeyError&) {
      throw;
    } catch (const Error& e) {  // an enum spelling the table does not know
      throw ModelKeyError(key, e.what());
    }
  }
  return o;
}

// A model whose section is the options struct O described by `fields`. `defaults` are the
// section's defaults (the reference's, which may differ from O{}); `check` throws ModelKeyError
// for impossible values.
template <typename O>
ModelKind model_kind(const std::string& name, std::vector<AttrField<O>> fields, O defaults,
                     std::function<void(const O&)> check,
                     std::function<BuiltModel(const O&)> build) {
  ModelKind k;
  k.name = name;
  for (const auto& f : fields) k.keys.push_back({f.key, f.type});
  k.canonical = [fields, defaults, check](const Attributes& attrs) {
    const O o = read_model_options(fields, defaults, attrs);
    check(o);
    Attributes out;
    for (const auto& f : fields) out.set(f.key, f.write(o));
    return out;
  };
  k.build = [fields, defaults, build](const Attributes& attrs) {
    return build(read_model_options(fields, defaults, attrs));
  };
  return k;
}

// An enum member read by any spelling its kEnumTable lists (match_enum_spelling), printed by the
// first: the reference files write LeakyReLU, older configs leaky_relu.
template <typename S, typename E>
AttrField<S> spelled_field(std::string key, E S::*member) {
  return {key, AttrType::text,
          [member](S& s, const AttrValue& v) {
            const auto& text = std::get<std::string>(v);
            const auto e = match_enum_spelling<E>(text);
            if (!e)
              throw_input("unknown value \"" + text +
                          "\" (expected one of: " + enum_primary_choices<E>() + ")");
            s.*member = *e;
          },
          [member](const S& s) -> AttrValue { return enum_name(s.*member); }};
}

bool register_model_kind(ModelKind kind);
// Throws crest::Error (input) listing the registered models when `name` is unknown.
const ModelKind& find_model_kind(const std::string& name);
const ModelKind* find_model_kind_or_null(const std::string& name);
std::vector<std::string> model_names();

#define CREST_REGISTER_MODEL(id, ...)                              \
  [[maybe_unused]] static const bool crest_model_registered_##id = \
      ::crest::register_model_kind(__VA_ARGS__)

}  // namespace crest
