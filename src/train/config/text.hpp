// How config values are spelled in messages and in resolved YAML.
#pragma once
#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "crest/graph/attributes.hpp"

namespace crest::config {

// Shortest round-trip text of a double, spelled so that YAML 1.1 loaders (PyYAML, as used by the
// reference) also read it as a float: they need a '.' in every float.
std::string format_double(double v);
// A double-quoted YAML string with escapes.
std::string quote(const std::string& s);
// How a value is shown in "got ..." messages.
std::string describe(const YAML::Node& v);
// "[128, 128, 128, 4]"
std::string list_text(const std::vector<int64_t>& v);
// An attribute as a resolved-YAML value (floats through format_double).
std::string yaml_text(const AttrValue& v);
std::string lower(std::string s);
// "a, b, c"
std::string join_list(const std::vector<std::string>& items);

}  // namespace crest::config
