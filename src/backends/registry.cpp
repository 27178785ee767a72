// The backend and kernel registries: filled by CREST_REGISTER_BACKEND / CREST_REGISTER_KERNEL
// lines in the backend folders CMake builds, so nothing here names a backend.
#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "crest/backends/kernels.hpp"
#include "crest/core/error.hpp"

namespace crest {
namespace {

struct BackendEntry {
  std::unique_ptr<Backend> (*make)();
  int preference;
  Support (*available)();  // null: runs wherever it was built
};

Support availability(const BackendEntry& e) { return e.available ? e.available() : Support::yes(); }

std::map<std::string, BackendEntry>& backends() {
  static std::map<std::string, BackendEntry> entries;
  return entries;
}

std::map<std::pair<std::string, std::type_index>, std::shared_ptr<const void>>& kernels() {
  static std::map<std::pair<std::string, std::type_index>, std::shared_ptr<const void>> makers;
  return makers;
}

}  // namespace

bool register_backend(const std::string& name, std::unique_ptr<Backend> (*make)(), int preference,
                      Support (*available)()) {
  CREST_CHECK(backends().emplace(name, BackendEntry{make, preference, available}).second,
              "backend '" + name + "' registered twice");
  return true;
}

// Availability is asked only of backends that would win, highest preference first: a start-up
// on a CPU machine never initialises a GPU runtime it will not use.
std::string default_backend_name() {
  std::vector<std::pair<int, std::string>> ranked;
  for (const auto& [name, entry] : backends()) ranked.emplace_back(-entry.preference, name);
  std::sort(ranked.begin(), ranked.end());
  for (const auto& [minus_preference, name] : ranked)
    if (availability(backends().at(name))) return name;
  return "";
}

void kernel_registry::add(const std::string& backend, std::type_index kernel,
                          std::shared_ptr<const void> maker) {
  CREST_CHECK(kernels().emplace(std::make_pair(backend, kernel), std::move(maker)).second,
              "a kernel registered twice for backend '" + backend + "'");
}

const void* kernel_registry::find(const std::string& backend, std::type_index kernel) {
  auto it = kernels().find({backend, kernel});
  return it == kernels().end() ? nullptr : it->second.get();
}

// The reference backend first (the oracle), the others by name.
std::vector<std::string> built_backend_names() {
  std::vector<std::string> names;
  if (backends().count("reference")) names.emplace_back("reference");
  for (const auto& [name, entry] : backends())
    if (name != "reference") names.push_back(name);
  return names;
}

std::vector<std::string> backend_names() {
  std::vector<std::string> names;
  for (const std::string& name : built_backend_names())
    if (availability(backends().at(name))) names.push_back(name);
  return names;
}

std::unique_ptr<Backend> make_backend(const std::string& name) {
  auto it = backends().find(name);
  if (it == backends().end()) {
    std::string known;
    for (const auto& n : backend_names()) known += (known.empty() ? "" : ", ") + n;
    throw_usage("unknown backend '" + name + "' (available: " + known + ")");
  }
  if (const Support s = availability(it->second); !s)
    throw_usage("backend '" + name + "' cannot run on this machine: " + s.reason);
  return it->second.make();
}

}  // namespace crest
