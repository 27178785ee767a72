// What loading a run config says: its crest::Error's message, for tests of refusals.
#pragma once
#include <string>
#include <vector>

#include "crest/core/error.hpp"
#include "crest/train/config.hpp"

namespace crest::test {

// The message of loading `yaml` (named "test.yaml") with `overrides`, or "(loaded)" when it loads.
inline std::string config_load_error(const std::string& yaml,
                                     const std::vector<std::string>& overrides) {
  try {
    load_config_text(yaml, "test.yaml", overrides);
  } catch (const Error& e) {
    return e.what();
  }
  return "(loaded)";
}

}  // namespace crest::test
