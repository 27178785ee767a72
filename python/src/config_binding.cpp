// crest.Config's native half: load (a file or YAML text, with overrides, validated exactly as the
// CLI validates), and the resolved config as YAML or as Python objects for attribute access
// (python/crest/config.py).
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "crest/train/config.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace crest::python {
namespace {

// A plain YAML scalar as the Python value YAML means (null, int, float, bool, else str); a
// quoted scalar stays a string.
nb::object scalar_of(const YAML::Node& n) {
  const std::string& text = n.Scalar();
  if (n.Tag() == "!") return nb::str(text.c_str());
  if (text.empty() || text == "~" || text == "null") return nb::none();
  int64_t i = 0;
  if (YAML::convert<int64_t>::decode(n, i)) return nb::int_(i);
  double d = 0;
  if (YAML::convert<double>::decode(n, d)) return nb::float_(d);
  bool b = false;
  if (YAML::convert<bool>::decode(n, b)) return nb::bool_(b);
  return nb::str(text.c_str());
}

// Recursive: a resolved config nests three levels deep.
nb::object python_of(const YAML::Node& n) {  // NOLINT(misc-no-recursion)
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      nb::dict d;
      for (const auto& kv : n) d[nb::str(kv.first.Scalar().c_str())] = python_of(kv.second);
      return d;
    }
    case YAML::NodeType::Sequence: {
      nb::list l;
      for (const auto& item : n) l.append(python_of(item));
      return l;
    }
    case YAML::NodeType::Scalar:
      return scalar_of(n);
    default:
      return nb::none();
  }
}

}  // namespace

void bind_config(nb::module_& m) {
  nb::class_<Config>(m, "NativeConfig", "A validated run config (crest.Config wraps it).")
      .def_ro("source", &Config::source, "The file (or name) it was loaded from.")
      .def_ro("overrides", &Config::overrides, "The overrides applied, in order.")
      .def_ro("output_dir", &Config::output_dir, "Where a run of it writes.")
      .def_ro("resolved_yaml", &Config::resolved_yaml,
              "Every key, defaults spelled out, as YAML; loading it gives the same config.")
      .def(
          "to_dict", [](const Config& c) { return python_of(YAML::Load(c.resolved_yaml)); },
          "The resolved config as nested dicts and lists.");
  m.def(
      "load_config",
      [](const std::string& path, const std::vector<std::string>& overrides) {
        return load_config(path, overrides);
      },
      "path"_a, "overrides"_a = std::vector<std::string>{},
      "Loads and validates a YAML run config with key.path=value overrides.");
  m.def(
      "load_config_text",
      [](const std::string& text, const std::string& source,
         const std::vector<std::string>& overrides) {
        return load_config_text(text, source, overrides);
      },
      "text"_a, "source"_a, "overrides"_a = std::vector<std::string>{},
      "The same from YAML text; `source` names it in messages.");
}

}  // namespace crest::python
