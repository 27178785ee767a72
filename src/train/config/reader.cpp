#include "config/reader.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>

namespace crest::config {
namespace {

// Quoted scalars ('4', "true") are strings in YAML; the reference (PyYAML) would pass them on as
// strings and fail later, so numbers and booleans must be plain.
bool is_quoted(const YAML::Node& v) { return v.Tag() == "!"; }

}  // namespace

std::string join_path(const std::string& section, const std::string& key) {
  return section.empty() ? key : section + "." + key;
}

void Source::note_override(const std::string& key, const std::string& text) {
  overrides_.erase(std::remove_if(overrides_.begin(), overrides_.end(),
                                  [&](const auto& o) { return o.first == key; }),
                   overrides_.end());
  overrides_.emplace_back(key, text);
}

bool Source::overridden(const std::string& path) const {
  for (const auto& [key, text] : overrides_)
    if (path == key || path.rfind(key + ".", 0) == 0) return true;
  return false;
}

std::string Source::where(const std::string& path, const YAML::Node& at) const {
  for (const auto& [key, text] : overrides_) {
    if (path == key || path.rfind(key + ".", 0) == 0 || path.rfind(key + "[", 0) == 0)
      return name_ + ": " + path + " (from override '" + text + "')";
  }
  const int line = at.IsDefined() ? at.Mark().line : -1;
  if (line >= 0) return name_ + ":" + std::to_string(line + 1) + ": " + path;
  return name_ + ": " + path;
}

namespace {

// The entries of mapping `v` at `path`; keys must be plain and unique.
void read_entries(const Source& src, const YAML::Node& v, Section& s) {
  if (!v.IsMap())
    src.fail(s.path, s.key, "expected a section of key: value lines, got " + describe(v));
  for (auto kv = v.begin(); kv != v.end(); ++kv) {
    if (!kv->first.IsScalar())
      src.fail(s.path, kv->first, "keys must be plain names, got " + describe(kv->first));
    const std::string name = kv->first.Scalar();
    // PyYAML keeps the last of two equal keys and yaml-cpp the first: refuse to guess.
    if (!s.entries.emplace(name, Entry{kv->first, kv->second}).second)
      src.fail(join_path(s.path, name), kv->first, "duplicate key");
  }
}

}  // namespace

Section open_top(const Source& src, const YAML::Node& root) {
  Section s;
  s.given = true;
  s.value = root;
  read_entries(src, root, s);
  return s;
}

Section open_section(const Source& src, const Section& parent, const std::string& key) {
  Section s;
  s.path = join_path(parent.path, key);
  const auto it = parent.entries.find(key);
  if (it == parent.entries.end()) return s;
  s.key = it->second.key;
  s.given = true;
  s.value = it->second.value;
  if (!it->second.value.IsNull()) read_entries(src, it->second.value, s);
  return s;
}

const Entry* SectionReader::get(const std::string& key) const {
  const auto it = s_.entries.find(key);
  if (it == s_.entries.end() || it->second.value.IsNull()) return nullptr;
  return &it->second;
}

void SectionReader::fail(const std::string& key, const std::string& message) const {
  const auto it = s_.entries.find(key);
  src_.fail(path_of(key), it == s_.entries.end() ? s_.key : it->second.key, message);
}

int64_t SectionReader::to_int(const std::string& path, const YAML::Node& at, const YAML::Node& v,
                              int64_t min, int64_t max) const {
  const std::string expected = min == 1   ? "a positive integer"
                               : min == 0 ? "a non-negative integer"
                                          : "an integer";
  if (!v.IsScalar()) src_.fail(path, at, "expected " + expected + ", got " + describe(v));
  if (is_quoted(v))
    src_.fail(
        path, at,
        "expected " + expected + ", got the string " + describe(v) + " (write it without quotes)");
  std::string s = v.Scalar();
  if (!s.empty() && s[0] == '+') s.erase(0, 1);
  int64_t out = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (ec == std::errc::result_out_of_range)
    src_.fail(path, at, "value " + describe(v) + " is too large");
  if (ec != std::errc() || end != s.data() + s.size() || s.empty())
    src_.fail(path, at, "expected " + expected + ", got " + describe(v));
  if (out < min) src_.fail(path, at, "expected " + expected + ", got " + std::to_string(out));
  if (out > max)
    src_.fail(
        path, at,
        "value " + std::to_string(out) + " is too large (at most " + std::to_string(max) + ")");
  return out;
}

double SectionReader::to_double(const std::string& path, const YAML::Node& at,
                                const YAML::Node& v) const {
  if (!v.IsScalar()) src_.fail(path, at, "expected a number, got " + describe(v));
  if (is_quoted(v))
    src_.fail(path, at,
              "expected a number, got the string " + describe(v) + " (write it without quotes)");
  const std::string& s = v.Scalar();
  errno = 0;
  char* end = nullptr;
  const double out = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || std::isspace(static_cast<unsigned char>(s[0])))
    src_.fail(path, at, "expected a number, got " + describe(v));
  if (!std::isfinite(out) || errno == ERANGE)
    src_.fail(path, at, "expected a finite number, got " + describe(v));
  return out;
}

bool SectionReader::to_bool(const std::string& path, const YAML::Node& at,
                            const YAML::Node& v) const {
  if (v.IsScalar() && !is_quoted(v)) {
    // The YAML 1.1 spellings PyYAML reads as booleans (the reference files write True).
    const std::string t = lower(v.Scalar());
    if (t == "true" || t == "yes" || t == "on") return true;
    if (t == "false" || t == "no" || t == "off") return false;
  }
  src_.fail(path, at, "expected true or false, got " + describe(v));
}

std::optional<int64_t> SectionReader::opt_int(const std::string& key, int64_t min,
                                              int64_t max) const {
  const Entry* e = get(key);
  if (!e) return std::nullopt;
  return to_int(path_of(key), e->key, e->value, min, max);
}

std::optional<double> SectionReader::opt_double(const std::string& key) const {
  const Entry* e = get(key);
  if (!e) return std::nullopt;
  return to_double(path_of(key), e->key, e->value);
}

std::optional<bool> SectionReader::opt_bool(const std::string& key) const {
  const Entry* e = get(key);
  if (!e) return std::nullopt;
  return to_bool(path_of(key), e->key, e->value);
}

std::optional<std::string> SectionReader::opt_string(const std::string& key) const {
  const Entry* e = get(key);
  if (!e) return std::nullopt;
  if (!e->value.IsScalar()) fail(key, "expected a string, got " + describe(e->value));
  return e->value.Scalar();
}

std::optional<std::vector<int64_t>> SectionReader::opt_int_list(const std::string& key,
                                                                int64_t min) const {
  const Entry* e = get(key);
  if (!e) return std::nullopt;
  if (!e->value.IsSequence())
    fail(key, "expected a list like [128, 128, 128, 4], got " + describe(e->value));
  std::vector<int64_t> out;
  for (size_t i = 0; i < e->value.size(); ++i)
    out.push_back(to_int(path_of(key) + "[" + std::to_string(i) + "]", e->key, e->value[i], min,
                         std::numeric_limits<int32_t>::max()));
  return out;
}

std::optional<uint64_t> SectionReader::opt_uint64(const std::string& key) const {
  const Entry* e = get(key);
  if (!e) return std::nullopt;
  if (e->value.IsScalar() && !is_quoted(e->value)) {
    const std::string& t = e->value.Scalar();
    uint64_t out = 0;
    const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), out);
    if (ec == std::errc() && end == t.data() + t.size() && !t.empty()) return out;
  }
  fail(key, "expected a non-negative integer, got " + describe(e->value));
}

// K/M/G/T and KiB/MiB/GiB/TiB are binary (as in Slurm and most HPC tools); KB/MB/GB/TB decimal.
std::optional<int64_t> SectionReader::opt_bytes(const std::string& key) const {
  const Entry* e = get(key);
  if (!e) return std::nullopt;
  const std::string bad = "expected a byte count like 4294967296 or \"4GiB\", got ";
  if (!e->value.IsScalar()) fail(key, bad + describe(e->value));
  const std::string t = e->value.Scalar();
  char* end = nullptr;
  const double number = std::strtod(t.c_str(), &end);
  std::string unit = lower(std::string(end));
  unit.erase(0, unit.find_first_not_of(' '));
  static const std::vector<std::pair<std::string, double>> units = {
      {"", 1},       {"b", 1},        {"k", 0x1p10},   {"kib", 0x1p10}, {"kb", 1e3},
      {"m", 0x1p20}, {"mib", 0x1p20}, {"mb", 1e6},     {"g", 0x1p30},   {"gib", 0x1p30},
      {"gb", 1e9},   {"t", 0x1p40},   {"tib", 0x1p40}, {"tb", 1e12}};
  if (end == t.c_str() || !std::isfinite(number)) fail(key, bad + describe(e->value));
  for (const auto& [name, scale] : units) {
    if (unit != name) continue;
    const double bytes = number * scale;
    if (bytes < 0) fail(key, "must not be negative, got " + describe(e->value));
    if (bytes > 9.0e18) fail(key, "value " + describe(e->value) + " is too large");
    return static_cast<int64_t>(bytes);
  }
  fail(key, bad + describe(e->value));
}

}  // namespace crest::config
