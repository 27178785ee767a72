#include "config/overrides.hpp"

#include <algorithm>
#include <vector>

#include "config/schema.hpp"

namespace crest::config {
namespace {

std::vector<std::string> split_path(const std::string& text, const std::string& key) {
  std::vector<std::string> segs;
  for (size_t pos = 0;;) {
    const auto dot = key.find('.', pos);
    segs.push_back(key.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos));
    if (dot == std::string::npos) break;
    pos = dot + 1;
  }
  for (const auto& seg : segs)
    if (seg.empty() || seg.find_first_of(" \t[]") != std::string::npos)
      throw_usage("override '" + text + "': malformed key path '" + key + "'");
  return segs;
}

// The path must name a key the schema knows, exactly as a key in the file would.
void check_path(const std::string& prefix, const std::vector<std::string>& segs) {
  std::string section;
  for (size_t i = 0; i < segs.size(); ++i) {
    const std::string path = join_path(section, segs[i]);
    if (is_free_map(section)) {
      if (i + 1 != segs.size()) throw_input(prefix + path + " is not a section");
      return;
    }
    const auto* known = keys_of(section);
    if (!known) throw_input(prefix + section + " is not a section");
    if (std::find(known->begin(), known->end(), segs[i]) == known->end())
      throw_input(prefix + "unknown key " + path + suggestion(section, segs[i], *known));
    section = path;
  }
}

// Sets root[segs...] = value, creating the sections on the way.
void set_path(const std::string& prefix, YAML::Node& root, const std::vector<std::string>& segs,
              const YAML::Node& value) {
  if (!root.IsMap()) root = YAML::Node(YAML::NodeType::Map);  // an empty file
  YAML::Node cur = root;
  std::string walked;
  for (size_t i = 0; i + 1 < segs.size(); ++i) {
    walked = join_path(walked, segs[i]);
    YAML::Node next = cur[segs[i]];
    if (!next.IsDefined() || next.IsNull()) {
      cur[segs[i]] = YAML::Node(YAML::NodeType::Map);
      next.reset(cur[segs[i]]);
    } else if (!next.IsMap()) {
      throw_input(prefix + walked + " is not a section (the file sets it to " + describe(next) +
                  ")");
    }
    // reset() rebinds; operator= would overwrite the node `cur` refers to.
    cur.reset(next);
  }
  cur[segs.back()] = value;
}

}  // namespace

void apply_override(Source& src, YAML::Node& root, const std::string& text) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    throw_usage("override '" + text +
                "': expected key.path=value, e.g. data.batch_size=2 or "
                "data.sample_shape=[32,32,32,4]");
  const std::string key = text.substr(0, eq);
  const std::vector<std::string> segs = split_path(text, key);
  const std::string prefix = src.name() + ": override '" + text + "': ";
  check_path(prefix, segs);
  YAML::Node value;
  try {
    value = YAML::Load(text.substr(eq + 1));
  } catch (const YAML::Exception& e) {
    throw_usage("override '" + text + "': the value is not valid YAML: " + e.msg);
  }
  set_path(prefix, root, segs, value);
  src.note_override(key, text);
}

}  // namespace crest::config
