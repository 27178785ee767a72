// The search space of `crest search` (docs/search.md): which config keys a study varies and how
// their values are drawn. A space file maps config keys to samplers:
//
//   parameters:
//     lr_schedule.base_lr: {loguniform: [1e-4, 1e-1]}
//     model.dropout: {uniform: [0, 0.5]}
//     data.batch_size: {choice: [2, 4, 8]}
//     model.conv_size: {randint: [4, 16]}          # integers, both ends included
//     optimizer.name: {choice: [SGD, LARC]}
//     optimizer.larc_mode: {choice: [clip, scale], when: {optimizer.name: LARC}}
//     data.seed: {grid: [0, 1, 2]}                 # grid studies enumerate choice and grid lists
//
// A trial's values are text, exactly what a `key=value` override of `crest train` takes, so a
// trial's config is the base config loaded with those overrides: the config schema is the one
// validator of keys and values.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace crest {

enum class SamplerKind { loguniform, uniform, randint, choice, grid };

struct SpaceParameter {
  std::string key;  // the config key path, e.g. "lr_schedule.base_lr"
  SamplerKind kind = SamplerKind::uniform;
  double low = 0, high = 0;         // loguniform, uniform, randint (randint: integers, inclusive)
  std::vector<std::string> values;  // choice, grid: each a YAML value as text ("4", "SGD")
  // Active only when every listed key (a parameter declared earlier in the file) has the given
  // value in the same trial; an inactive parameter keeps the base config's value.
  std::vector<std::pair<std::string, std::string>> when;
  int line = 0;  // in the space file, for messages
};

struct SearchSpace {
  std::string source;  // the file, for messages
  std::vector<SpaceParameter> parameters;
  // The keys of the file beyond `parameters:` (e.g. asha:, pbt:), as the YAML text of each
  // section, read by the algorithms that use them.
  std::vector<std::pair<std::string, std::string>> sections;
};

// A trial's hyperparameters: (config key, value as override text), in space-file order, inactive
// conditional parameters left out.
using Assignment = std::vector<std::pair<std::string, std::string>>;

// Parses a space file (or text, `source` naming it). Throws crest::Error (input) naming the file,
// line and key for a malformed entry: unknown sampler, low > high, a loguniform bound <= 0, an
// empty choice, a `when:` on a key not declared before it.
SearchSpace load_search_space(const std::string& path);
SearchSpace parse_search_space(const std::string& yaml, const std::string& source);

// Trial `index` of a random study: a pure function of (seed, index, space), so trial 7 of seed 3
// is the same whichever group draws it and whenever.
Assignment sample_trial(const SearchSpace& space, uint64_t seed, uint64_t index);

// Every combination of the choice and grid lists, first parameter slowest, inactive conditional
// parameters left out and duplicates dropped. Throws crest::Error (usage) naming a continuous
// parameter (a grid cannot enumerate it), or the parameter at which the grid passes 100,000
// points (before it is built).
std::vector<Assignment> grid_trials(const SearchSpace& space);

// The value of `key` in `a`, or "" when the trial does not set it.
std::string value_of(const Assignment& a, const std::string& key);

// `key=value` overrides for load_config.
std::vector<std::string> as_overrides(const Assignment& a);

// A real value as a trial's config override writes it: 17 significant digits, so the config
// holds exactly the value drawn.
std::string exact_text(double v);

}  // namespace crest
