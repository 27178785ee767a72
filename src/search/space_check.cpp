// Every parameter of a space checked through the config loader (crest/search/space_check.hpp).
#include "crest/search/space_check.hpp"

#include <cstdio>

#include "crest/core/error.hpp"
#include "crest/train/config.hpp"

namespace crest {
namespace {

// The values that stand for a parameter: a range's two ends (every value between them is as
// acceptable to the schema as its ends, whose checks are bounds), a list's every value.
std::vector<std::string> probe_values(const SpaceParameter& p) {
  switch (p.kind) {
    case SamplerKind::choice:
    case SamplerKind::grid:
      return p.values;
    case SamplerKind::randint:
      return {std::to_string(static_cast<int64_t>(p.low)),
              std::to_string(static_cast<int64_t>(p.high))};
    case SamplerKind::uniform:
    case SamplerKind::loguniform:
      return {exact_text(p.low), exact_text(p.high)};
  }
  return {};
}

// A whole trial that gives `probe` the value `v`: its `when:` keys the values it needs, every
// other active parameter its first probe value. Whole trials, not single keys, because the schema
// checks keys together (optimizer.name: LARC needs optimizer.larc_base, which a conditional
// parameter may give).
Assignment probe_trial(const SearchSpace& space, const SpaceParameter& probe,
                       const std::string& v) {
  Assignment a;
  for (const SpaceParameter& p : space.parameters) {
    std::string value = probe_values(p).front();
    for (const auto& [key, needed] : probe.when)
      if (key == p.key) value = needed;
    if (&p == &probe) {
      value = v;
    } else {
      bool active = true;
      for (const auto& [key, needed] : p.when) active = active && value_of(a, key) == needed;
      if (!active) continue;
    }
    a.emplace_back(p.key, value);
  }
  return a;
}

// The parameter the loader's message is about: the one whose override it quotes ("override
// 'model.dropuot=0': unknown key"), else the one probed.
const SpaceParameter& blamed(const SearchSpace& space, const Assignment& trial,
                             const std::string& message, const SpaceParameter& probed) {
  for (const auto& [key, value] : trial)
    if (message.find("'" + key + "=" + value + "'") != std::string::npos)
      for (const SpaceParameter& p : space.parameters)
        if (p.key == key) return p;
  return probed;
}

}  // namespace

void check_space_against_config(const SearchSpace& space, const std::string& base_config,
                                const std::vector<std::string>& base_overrides) {
  for (const SpaceParameter& p : space.parameters) {
    for (const std::string& v : probe_values(p)) {
      const Assignment trial = probe_trial(space, p, v);
      std::vector<std::string> with = base_overrides;
      for (const auto& o : as_overrides(trial)) with.push_back(o);
      try {
        (void)load_config(base_config, with);
      } catch (const Error& e) {
        const SpaceParameter& at = blamed(space, trial, e.what(), p);
        throw_input(space.source + ":" + std::to_string(at.line) + ": parameters." + at.key +
                    ": the value " + value_of(trial, at.key) +
                    " is refused by the config schema: " + e.what());
      }
    }
  }
}

}  // namespace crest
