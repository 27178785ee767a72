// The kept choices of a backend's measurements (tuned_choices.hpp): the machine cache and the
// run's record, both JSON, written whole by atomic replacement.
#include "tuned_choices.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <system_error>

#include "crest/core/atomic_file.hpp"
#include "crest/core/error.hpp"

namespace crest {
namespace {

constexpr int kFormatVersion = 1;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

std::string read_text(const std::string& path, bool& exists) {
  std::ifstream in(path, std::ios::binary);
  exists = static_cast<bool>(in);
  std::ostringstream s;
  if (exists) s << in.rdbuf();
  if (exists && in.bad()) throw std::runtime_error("read error");
  return s.str();
}

// A map of strings to strings, or nullopt when `j` is anything else.
std::optional<std::map<std::string, std::string>> string_map(const nlohmann::json& j) {
  if (!j.is_object()) return std::nullopt;
  std::map<std::string, std::string> m;
  for (const auto& [k, v] : j.items()) {
    if (!v.is_string()) return std::nullopt;
    m[k] = v.get<std::string>();
  }
  return m;
}

// The cache file: {"version": 1, "machines": {signature: {problem: candidate}}}. Returns the
// whole parsed document, or a reason it is unusable.
struct CacheDocument {
  nlohmann::json doc;
  std::string problem;  // "" when doc is usable
};

CacheDocument read_cache(const std::string& path) {
  CacheDocument c{
      nlohmann::json{{"version", kFormatVersion}, {"machines", nlohmann::json::object()}}, ""};
  bool exists = false;
  std::string text;
  try {
    text = read_text(path, exists);
  } catch (const std::exception&) {
    c.problem = "cannot be read";
    return c;
  }
  if (!exists) return c;
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) {
    c.problem = "is not valid JSON";
  } else if (!j.is_object() || j.value("version", 0) != kFormatVersion || !j.contains("machines") ||
             !j["machines"].is_object()) {
    c.problem = "is not a version-" + std::to_string(kFormatVersion) + " layout cache";
  } else {
    for (const auto& [machine, choices] : j["machines"].items())
      if (!string_map(choices)) c.problem = "has a malformed entry for machine '" + machine + "'";
  }
  if (c.problem.empty()) c.doc = std::move(j);
  return c;
}

void write_json(const std::string& path, const nlohmann::json& j) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  // rename_only: a cache, rewritten often; a lost update is measured again.
  AtomicOutputFile out(path, CommitSync::rename_only);
  out.write(j.dump(1) + "\n");
  out.commit();
}

}  // namespace

std::string default_layout_cache_path() {
  if (std::string p = env("CREST_LAYOUT_CACHE"); !p.empty()) return p;
  if (std::string x = env("XDG_CACHE_HOME"); !x.empty()) return x + "/crest/layouts.json";
  if (std::string h = env("HOME"); !h.empty()) return h + "/.cache/crest/layouts.json";
  return "";
}

TunedChoices::TunedChoices(LayoutTuning options, std::string machine, TunerNotes notes)
    : options_(std::move(options)), notes_(std::move(notes)), machine_(std::move(machine)) {
  if (!notes_) notes_ = [](const std::string& line) { std::cerr << line << "\n"; };
  cache_path_ = options_.cache_file.empty() ? default_layout_cache_path() : options_.cache_file;
  if (options_.record_file.empty()) return;
  if (!options_.reuse_record) {
    std::error_code ec;
    std::filesystem::remove(options_.record_file, ec);  // an earlier run's: not ours to resume
    return;
  }
  bool exists = false;
  std::string text;
  try {
    text = read_text(options_.record_file, exists);
  } catch (const std::exception&) {
  }
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  std::optional<std::map<std::string, std::string>> choices;
  if (!j.is_discarded() && j.is_object() && j.value("version", 0) == kFormatVersion &&
      j.contains("choices"))
    choices = string_map(j["choices"]);
  // Without its record a resumed run would compute with other layouts, and so other rounding,
  // than the run it continues: refuse rather than continue differently.
  if (!choices)
    throw_input(options_.record_file + ": " + (exists ? "damaged" : "missing") +
                " record of the layouts this run chose; delete it to resume with the default "
                "layouts instead");
  pinned_ = *choices;
  record_ = pinned_;
}

void TunedChoices::note(const std::string& line) const { notes_(line); }

void TunedChoices::warn_once(bool& warned, const std::string& line) const {
  if (warned) return;
  warned = true;
  note("crest: warning: " + line);
}

void TunedChoices::load_cache() {
  if (cache_loaded_) return;
  cache_loaded_ = true;
  if (cache_path_.empty()) return;
  const CacheDocument c = read_cache(cache_path_);
  if (!c.problem.empty()) {
    warn_once(cache_read_warned_, "layout cache " + cache_path_ + " " + c.problem +
                                      ": ignored (it is rewritten with new measurements)");
    return;
  }
  const auto& machines = c.doc["machines"];
  if (machines.contains(machine_)) cache_ = *string_map(machines[machine_]);
}

std::optional<std::string> TunedChoices::known(const std::string& problem) {
  if (auto it = pinned_.find(problem); it != pinned_.end()) return it->second;
  if (!options_.measure) return std::nullopt;
  load_cache();
  if (auto it = cache_.find(problem); it != cache_.end()) return it->second;
  return std::nullopt;
}

void TunedChoices::remember(const std::string& problem, const std::string& candidate,
                            bool measured) {
  record_[problem] = candidate;
  if (!options_.record_file.empty()) write_record();
  if (measured) store_in_cache(problem, candidate);
}

void TunedChoices::write_record() {
  nlohmann::json j{{"version", kFormatVersion}, {"machine", machine_}, {"choices", record_}};
  try {
    write_json(options_.record_file, j);
  } catch (const std::exception& e) {
    warn_once(record_warned_,
              "cannot write the run's layout record (a resume will use the "
              "default layouts): " +
                  std::string(e.what()));
  }
}

// Read again before writing: other ranks (and other runs) on this node add their choices to the
// same file. Atomic replacement keeps the file whole; the last writer wins a race.
void TunedChoices::store_in_cache(const std::string& problem, const std::string& candidate) {
  cache_[problem] = candidate;
  if (cache_path_.empty()) return;
  CacheDocument c = read_cache(cache_path_);
  if (!c.problem.empty())
    warn_once(cache_read_warned_, "layout cache " + cache_path_ + " " + c.problem +
                                      ": ignored (it is rewritten with new measurements)");
  c.doc["machines"][machine_][problem] = candidate;
  try {
    write_json(cache_path_, c.doc);
  } catch (const std::exception& e) {
    warn_once(cache_write_warned_,
              "cannot write the layout cache (layouts are measured again next time): " +
                  std::string(e.what()));
  }
}

}  // namespace crest
