// Parsing and sampling of search spaces (crest/search/search_space.hpp, docs/search.md).
#include "crest/search/search_space.hpp"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "crest/core/error.hpp"
#include "crest/core/hash_rng.hpp"

namespace crest {
namespace {

struct SamplerName {
  SamplerKind kind;
  const char* name;
};
constexpr SamplerName kSamplers[] = {
    {SamplerKind::loguniform, "loguniform"}, {SamplerKind::uniform, "uniform"},
    {SamplerKind::randint, "randint"},       {SamplerKind::randint, "int"},
    {SamplerKind::choice, "choice"},         {SamplerKind::grid, "grid"}};

std::string sampler_list() {
  std::string s;
  for (const auto& n : kSamplers) s += (s.empty() ? "" : ", ") + std::string(n.name);
  return s;
}

// "space.yaml:12: parameters.model.dropout"
std::string where(const std::string& source, const YAML::Node& node, const std::string& key) {
  const int line = node.Mark().line;
  return source + (line >= 0 ? ":" + std::to_string(line + 1) : "") + ": parameters." + key;
}

// A YAML value as the text of a `key=value` override: scalars as written, lists and maps in
// flow style.
std::string value_text(const YAML::Node& v) {
  if (v.IsScalar()) return v.Scalar();
  YAML::Emitter out;
  out << YAML::Flow << v;
  return out.c_str();
}

// A map key as text. YAML allows any node as a key (`? [a, b]: 1`, `? {a: 1}: 2`), on which
// yaml-cpp's as<std::string>() throws its own exception, not crest's (fuzz_search_space's first
// finding): refused here, naming the line.
std::string key_text(const YAML::Node& key, const std::string& source, const std::string& in) {
  if (!key.IsScalar()) {
    const int line = key.Mark().line;
    throw_input(source + (line >= 0 ? ":" + std::to_string(line + 1) : "") + ": " + in +
                ": a key must be plain text, got '" + value_text(key) + "'");
  }
  return key.Scalar();
}

double number(const YAML::Node& v, const std::string& at) {
  double d = 0;
  if (!v.IsScalar() || !YAML::convert<double>::decode(v, d) || !std::isfinite(d))
    throw_input(at + ": bounds must be finite numbers, got '" + value_text(v) + "'");
  return d;
}

void read_range(SpaceParameter& p, const YAML::Node& spec, const std::string& at,
                const std::string& sampler) {
  if (!spec.IsSequence() || spec.size() != 2)
    throw_input(at + ": " + sampler + " takes [low, high], got '" + value_text(spec) + "'");
  p.low = number(spec[0], at);
  p.high = number(spec[1], at);
  if (p.low > p.high)
    throw_input(at + ": " + sampler + " low " + value_text(spec[0]) + " > high " +
                value_text(spec[1]));
  if (p.kind == SamplerKind::loguniform && p.low <= 0)
    throw_input(at + ": loguniform bounds must be > 0 (a log scale), got low " +
                value_text(spec[0]));
  if (p.kind == SamplerKind::randint &&
      (p.low != std::floor(p.low) || p.high != std::floor(p.high)))
    throw_input(at + ": " + sampler + " bounds must be integers, got '" + value_text(spec) + "'");
  // Integers a double holds exactly, so that the span and the drawn value fit int64 (a bound of
  // 6.8e104 made the draw's conversion undefined: fuzz_search_space's second finding).
  constexpr double kMaxInteger = 9007199254740992.0;  // 2^53
  if (p.kind == SamplerKind::randint &&
      (std::fabs(p.low) > kMaxInteger || std::fabs(p.high) > kMaxInteger))
    throw_input(at + ": " + sampler + " bounds must lie within +-2^53 (9007199254740992), got '" +
                value_text(spec) + "'");
  // A range wider than the largest double ([-1e308, 1e308]) would draw infinities.
  if (!std::isfinite(p.high - p.low))
    throw_input(at + ": " + sampler + " range '" + value_text(spec) +
                "' is wider than a double holds");
}

void read_when(SpaceParameter& p, const YAML::Node& when, const std::string& at,
               const std::string& source, const std::set<std::string>& declared) {
  if (!when.IsMap() || when.size() == 0)
    throw_input(at + ": when: takes {key: value, ...} naming parameters declared above");
  for (const auto& kv : when) {
    const std::string key = key_text(kv.first, source, "parameters." + p.key + ".when");
    if (!declared.count(key))
      throw_input(at + ": when: " + key +
                  " is not a parameter declared above it (conditions read earlier parameters)");
    p.when.emplace_back(key, value_text(kv.second));
  }
}

SpaceParameter read_parameter(const std::string& key, const YAML::Node& spec,
                              const std::string& source, const std::set<std::string>& declared) {
  const std::string at = where(source, spec, key);
  SpaceParameter p;
  p.key = key;
  p.line = spec.Mark().line + 1;
  if (!spec.IsMap())
    throw_input(at + ": expected {sampler: ...} with a sampler of " + sampler_list() + ", got '" +
                value_text(spec) + "'");
  bool have_sampler = false;
  for (const auto& kv : spec) {
    const std::string name = key_text(kv.first, source, "parameters." + key);
    if (name == "when") {
      read_when(p, kv.second, at, source, declared);
      continue;
    }
    const SamplerName* found = nullptr;
    for (const auto& s : kSamplers)
      if (name == s.name) found = &s;
    if (!found)
      throw_input(at + ": unknown sampler '" + name + "' (known: " + sampler_list() + ", when)");
    if (have_sampler) throw_input(at + ": more than one sampler");
    have_sampler = true;
    p.kind = found->kind;
    if (p.kind == SamplerKind::choice || p.kind == SamplerKind::grid) {
      if (!kv.second.IsSequence() || kv.second.size() == 0)
        throw_input(at + ": " + name + " takes a non-empty list of values");
      for (const auto& v : kv.second) p.values.push_back(value_text(v));
    } else {
      read_range(p, kv.second, at, name);
    }
  }
  if (!have_sampler) throw_input(at + ": no sampler (one of " + sampler_list() + ")");
  return p;
}

// A double as text that reads back as the same double.
bool active(const SpaceParameter& p, const Assignment& so_far) {
  for (const auto& [key, value] : p.when)
    if (value_of(so_far, key) != value) return false;
  return true;
}

// The stream of draws for parameter `i` of a study: independent of the other parameters, so
// adding a parameter at the end leaves the earlier ones' values unchanged.
uint64_t stream_key(uint64_t seed, size_t i) {
  return rng::splitmix64(rng::splitmix64(seed) ^ (0x5EA2C4ull + static_cast<uint64_t>(i)));
}

std::string draw(const SpaceParameter& p, uint64_t bits) {
  switch (p.kind) {
    case SamplerKind::uniform:
      return exact_text(p.low + (p.high - p.low) * rng::unit_double(bits));
    case SamplerKind::loguniform: {
      const double l = std::log(p.low), h = std::log(p.high);
      return exact_text(std::min(p.high, std::exp(l + (h - l) * rng::unit_double(bits))));
    }
    case SamplerKind::randint: {
      const auto span = static_cast<uint64_t>(p.high - p.low) + 1;
      return std::to_string(static_cast<int64_t>(p.low) + static_cast<int64_t>(bits % span));
    }
    case SamplerKind::choice:
    case SamplerKind::grid:
      return p.values[bits % p.values.size()];
  }
  return "";
}

}  // namespace

SearchSpace parse_search_space(const std::string& yaml, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    throw_input(source + ":" + std::to_string(e.mark.line + 1) + ": YAML syntax error: " + e.msg);
  }
  if (!root.IsMap()) throw_input(source + ": expected a map with a parameters: section");
  SearchSpace space;
  space.source = source;
  std::set<std::string> declared;
  for (const auto& section : root) {
    const std::string name = key_text(section.first, source, "the top level");
    if (name != "parameters") {
      space.sections.emplace_back(name, YAML::Dump(section.second));
      continue;
    }
    if (!section.second.IsMap() || section.second.size() == 0)
      throw_input(source + ": parameters: must map config keys to samplers");
    for (const auto& kv : section.second) {
      const std::string key = key_text(kv.first, source, "parameters");
      if (declared.count(key)) throw_input(source + ": parameters." + key + ": given twice");
      space.parameters.push_back(read_parameter(key, kv.second, source, declared));
      declared.insert(key);
    }
  }
  if (space.parameters.empty()) throw_input(source + ": no parameters: section");
  return space;
}

SearchSpace load_search_space(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_input(path + ": cannot open the search space file");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_search_space(text.str(), path);
}

Assignment sample_trial(const SearchSpace& space, uint64_t seed, uint64_t index) {
  Assignment a;
  for (size_t i = 0; i < space.parameters.size(); ++i) {
    const SpaceParameter& p = space.parameters[i];
    if (!active(p, a)) continue;
    a.emplace_back(p.key, draw(p, rng::counter_bits(stream_key(seed, i), index)));
  }
  return a;
}

std::vector<Assignment> grid_trials(const SearchSpace& space) {
  constexpr size_t kMaxGridTrials = 100000;
  for (const auto& p : space.parameters)
    if (p.kind != SamplerKind::choice && p.kind != SamplerKind::grid)
      throw_usage(space.source + ": parameters." + p.key +
                  ": a grid study enumerates choice and grid lists; this parameter is a "
                  "continuous range (use --algorithm random, or list its values with grid:)");
  std::vector<Assignment> partial{{}};
  for (const auto& p : space.parameters) {
    std::vector<Assignment> next;
    for (const Assignment& a : partial) {
      if (!active(p, a)) {
        next.push_back(a);
        continue;
      }
      for (const auto& v : p.values) {
        Assignment b = a;
        b.emplace_back(p.key, v);
        next.push_back(std::move(b));
      }
      // Every trial is a training run: a grid past this is a typo, and enumerating it would
      // exhaust memory first (a list-only space of 30 two-value parameters has 10^9 points).
      if (next.size() > kMaxGridTrials)
        throw_usage(space.source + ": parameters." + p.key + ": the grid has more than " +
                    std::to_string(kMaxGridTrials) +
                    " points; use --algorithm random (or asha) with --trials N");
    }
    partial = std::move(next);
  }
  std::vector<Assignment> out;
  std::set<Assignment> seen;
  for (auto& a : partial)
    if (seen.insert(a).second) out.push_back(std::move(a));
  return out;
}

std::string value_of(const Assignment& a, const std::string& key) {
  for (const auto& [k, v] : a)
    if (k == key) return v;
  return "";
}

std::vector<std::string> as_overrides(const Assignment& a) {
  std::vector<std::string> out;
  for (const auto& [k, v] : a) out.push_back(k + "=" + v);
  return out;
}

std::string exact_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace crest
