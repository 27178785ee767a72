// Validation of a search space against the config schema, before any training starts.
#pragma once
#include <string>
#include <vector>

#include "crest/search/search_space.hpp"

namespace crest {

// Loads the base config once per value a parameter can take at its extremes (both bounds of a
// range, every value of a list), with the parameter's `when:` conditions set, through the normal
// loader (load_config with `key=value` overrides): an unknown key or a value the schema refuses
// throws crest::Error (input) naming the space file, the parameter's line and key, and the
// loader's message.
void check_space_against_config(const SearchSpace& space, const std::string& base_config,
                                const std::vector<std::string>& base_overrides);

}  // namespace crest
