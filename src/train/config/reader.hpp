// Typed, located access to a config's YAML: every value read through here that is wrong raises a
// crest::Error (input) naming the file, the line and the key path, or the override it came from.
#pragma once
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/text.hpp"
#include "crest/core/enum_table.hpp"
#include "crest/core/error.hpp"

namespace crest::config {

std::string join_path(const std::string& section, const std::string& key);

// Where a config came from: the file (or name) and the overrides applied to it.
class Source {
 public:
  explicit Source(std::string name) : name_(std::move(name)) {}
  const std::string& name() const { return name_; }
  // A later override of the same key wins; only the latest text is named in messages.
  void note_override(const std::string& key, const std::string& text);
  // The key path, or a section holding it, was set by an override.
  bool overridden(const std::string& path) const;
  // "file:line: path" or "file: path (from override 'x=y')".
  std::string where(const std::string& path, const YAML::Node& at) const;
  [[noreturn]] void fail(const std::string& path, const YAML::Node& at,
                         const std::string& message) const {
    throw_input(where(path, at) + ": " + message);
  }

 private:
  std::string name_;
  std::vector<std::pair<std::string, std::string>> overrides_;  // key path -> override text
};

struct Entry {
  YAML::Node key;
  YAML::Node value;
};

// One mapping of the file, its keys checked to be plain and unique.
struct Section {
  std::string path;    // "" for the top level
  YAML::Node key;      // the section's own key (for "missing" errors)
  bool given = false;  // present in the file, even if empty
  YAML::Node value;    // the mapping itself (null when absent)
  std::map<std::string, Entry> entries;
};

Section open_top(const Source& src, const YAML::Node& root);
// The mapping `key` of `parent`; an empty section when it is absent or null.
Section open_section(const Source& src, const Section& parent, const std::string& key);

class SectionReader {
 public:
  SectionReader(const Source& src, Section s) : src_(src), s_(std::move(s)) {}
  const Source& source() const { return src_; }
  const Section& section() const { return s_; }
  std::string path_of(const std::string& key) const { return join_path(s_.path, key); }

  // The entry of `key`, or nullptr when absent or null (null means "use the default").
  const Entry* get(const std::string& key) const;
  bool has(const std::string& key) const { return get(key) != nullptr; }
  // Names the key's line, or the section's when the key is absent.
  [[noreturn]] void fail(const std::string& key, const std::string& message) const;

  std::optional<int64_t> opt_int(const std::string& key, int64_t min,
                                 int64_t max = std::numeric_limits<int32_t>::max()) const;
  std::optional<double> opt_double(const std::string& key) const;
  std::optional<bool> opt_bool(const std::string& key) const;
  std::optional<std::string> opt_string(const std::string& key) const;
  std::optional<std::vector<int64_t>> opt_int_list(const std::string& key, int64_t min) const;
  std::optional<uint64_t> opt_uint64(const std::string& key) const;
  // A byte count: an integer, or a number with a unit ("4GiB").
  std::optional<int64_t> opt_bytes(const std::string& key) const;
  template <typename E>
  std::optional<E> opt_enum(const std::string& key) const {
    const auto text = opt_string(key);
    if (!text) return std::nullopt;
    if (const auto e = match_enum_spelling<E>(*text)) return e;
    fail(key,
         "unknown value " + quote(*text) + " (expected one of: " + enum_primary_choices<E>() + ")");
  }

  // Conversions of one node, for values inside lists and maps (`path` names the item).
  int64_t to_int(const std::string& path, const YAML::Node& at, const YAML::Node& v, int64_t min,
                 int64_t max) const;
  double to_double(const std::string& path, const YAML::Node& at, const YAML::Node& v) const;
  bool to_bool(const std::string& path, const YAML::Node& at, const YAML::Node& v) const;

 private:
  const Source& src_;
  Section s_;
};

}  // namespace crest::config
