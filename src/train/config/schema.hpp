// The keys each section accepts, gathered from the section tables and the registered models, and
// the "did you mean" help for a key that is not among them.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "config/reader.hpp"

namespace crest::config {

using Schema = std::vector<std::pair<std::string, std::vector<std::string>>>;
// "" is the top level. model: lists the keys of every registered model and of a graph.
const Schema& schema();
const std::vector<std::string>* keys_of(const std::string& section);
// Maps whose keys are data rather than schema (epochs in the decay schedule).
bool is_free_map(const std::string& path);

// " (did you mean data.batch_size?)", " (it belongs in another section: data.n_epochs)", or the
// list of `known`.
std::string suggestion(const std::string& section, const std::string& key,
                       const std::vector<std::string>& known);
// Refuses the first key of `s` that is not in `known`.
void check_known_keys(const Source& src, const Section& s, const std::vector<std::string>& known);

}  // namespace crest::config
