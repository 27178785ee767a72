// PBT's perturbation (crest/search/pbt.hpp).
#include "crest/search/pbt.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "crest/core/hash_rng.hpp"

namespace crest {
namespace {

std::string scaled(const SpaceParameter& p, const std::string& value, bool up) {
  const double factor = up ? 1.2 : 0.8;
  const double v = std::clamp(std::strtod(value.c_str(), nullptr) * factor, p.low, p.high);
  if (p.kind == SamplerKind::randint) {
    auto i = static_cast<int64_t>(std::llround(v));
    // An integer too small to move by 20% still moves by one.
    const auto old = static_cast<int64_t>(std::llround(std::strtod(value.c_str(), nullptr)));
    if (i == old)
      i = std::clamp<int64_t>(old + (up ? 1 : -1), static_cast<int64_t>(p.low),
                              static_cast<int64_t>(p.high));
    return std::to_string(i);
  }
  return exact_text(v);
}

}  // namespace

Assignment perturb(const SearchSpace& space, const Assignment& params, const PbtSettings& settings,
                   uint64_t seed, uint64_t counter) {
  std::set<std::string> conditions;
  for (const auto& p : space.parameters)
    for (const auto& [key, value] : p.when) conditions.insert(key);
  Assignment out;
  for (size_t i = 0; i < space.parameters.size(); ++i) {
    const SpaceParameter& p = space.parameters[i];
    const std::string value = value_of(params, p.key);
    if (value.empty()) continue;  // inactive in the donor: stays so
    const uint64_t key = rng::splitmix64(seed ^ (0x9B7ull + i));
    const uint64_t a = rng::counter_bits(key, 2 * counter),
                   b = rng::counter_bits(key, 2 * counter + 1);
    std::string v = value;
    if (p.kind == SamplerKind::choice || p.kind == SamplerKind::grid) {
      if (!conditions.count(p.key) && rng::unit_double(a) < settings.resample)
        v = p.values[b % p.values.size()];
    } else {
      v = scaled(p, value, (a & 1) != 0);
    }
    out.emplace_back(p.key, v);
  }
  return out;
}

std::string pbt_refused_key(const SearchSpace& space) {
  for (const auto& p : space.parameters)
    if (p.key.rfind("model.", 0) == 0 || p.key == "optimizer.name" ||
        p.key.rfind("optimizer.larc_base", 0) == 0)
      return p.key;
  return "";
}

}  // namespace crest
