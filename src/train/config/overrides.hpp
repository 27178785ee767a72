// `crest train --config FILE key.path=value ...`: overrides change the YAML tree before it is
// read, so an overridden value is checked exactly like one in the file.
#pragma once
#include <yaml-cpp/yaml.h>

#include <string>

#include "config/reader.hpp"

namespace crest::config {

// Applies "key.path=value" (the value parsed as YAML; null restores a default) to `root` and
// notes it in `src` for messages. Throws crest::Error: usage for a malformed override, input for
// a key the schema does not know.
void apply_override(Source& src, YAML::Node& root, const std::string& text);

}  // namespace crest::config
