#include "onednn/layout_tuner.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <oneapi/dnnl/dnnl.hpp>
#include <sstream>
#include <system_error>

#include "crest/core/atomic_file.hpp"
#include "crest/core/error.hpp"

namespace crest::onednn {
namespace {

constexpr int kFormatVersion = 1;

class ClockTimer final : public LayoutTimer {
 public:
  explicit ClockTimer(int repetitions) : repetitions_(std::max(1, repetitions)) {}
  double seconds(const std::string& /*candidate*/, const std::string& /*pass*/,
                 const std::function<void()>& call) override {
    call();  // warm-up
    double best = 0;
    for (int i = 0; i < repetitions_; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      call();
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (i == 0 || s < best) best = s;
    }
    return best;
  }

 private:
  int repetitions_;
};

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) break;
    const auto start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "" : line.substr(start);
  }
  return "unknown cpu";
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

std::unique_ptr<LayoutTimer> make_clock_timer(int repetitions) {
  return std::make_unique<ClockTimer>(repetitions);
}

std::string machine_signature() {
  const dnnl_version_t* v = dnnl_version();
  return cpu_model() + "; oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) +
         "." + std::to_string(v->patch) + " isa " +
         std::to_string(static_cast<int>(dnnl::get_effective_cpu_isa())) + "; " +
         std::to_string(omp_get_max_threads()) + " threads";
}

std::string default_layout_cache_path() {
  if (std::string p = env("CREST_LAYOUT_CACHE"); !p.empty()) return p;
  if (std::string x = env("XDG_CACHE_HOME"); !x.empty()) return x + "/crest/layouts.json";
  if (std::string h = env("HOME"); !h.empty()) return h + "/.cache/crest/layouts.json";
  return "";
}

LayoutTuner::LayoutTuner(LayoutTuning options, std::unique_ptr<LayoutTimer> timer, TunerNotes notes)
    : options_(std::move(options)), timer_(std::move(timer)), notes_(std::move(notes)) {
  if (!notes_) notes_ = [](const std::string& line) { std::cerr << line << "\n"; };
  machine_ = machine_signature();
  verbose_ = !env("CREST_AUTOTUNE_VERBOSE").empty();
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

void LayoutTuner::note(const std::string& line) const { notes_(line); }

void LayoutTuner::warn_once(bool& warned, const std::string& line) const {
  if (warned) return;
  warned = true;
  note("crest: warning: " + line);
}

void LayoutTuner::load_cache() {
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

std::optional<std::string> LayoutTuner::known(const std::string& problem) {
  if (auto it = pinned_.find(problem); it != pinned_.end()) return it->second;
  if (!options_.measure) return std::nullopt;
  load_cache();
  if (auto it = cache_.find(problem); it != cache_.end()) return it->second;
  return std::nullopt;
}

void LayoutTuner::remember(const std::string& problem, const std::string& candidate,
                           bool measured) {
  record_[problem] = candidate;
  if (!options_.record_file.empty()) write_record();
  if (measured) store_in_cache(problem, candidate);
}

void LayoutTuner::write_record() {
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
void LayoutTuner::store_in_cache(const std::string& problem, const std::string& candidate) {
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

}  // namespace crest::onednn
