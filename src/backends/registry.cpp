// The backend and kernel registries: filled by CREST_REGISTER_BACKEND / CREST_REGISTER_KERNEL
// lines in the backend folders CMake builds, so nothing here names a backend.
#include <map>

#include "crest/backends/kernels.hpp"
#include "crest/core/error.hpp"

namespace crest {
namespace {

struct BackendEntry {
  std::unique_ptr<Backend> (*make)();
  int preference;
};

std::map<std::string, BackendEntry>& backends() {
  static std::map<std::string, BackendEntry> entries;
  return entries;
}

std::map<std::pair<std::string, std::type_index>, std::shared_ptr<const void>>& kernels() {
  static std::map<std::pair<std::string, std::type_index>, std::shared_ptr<const void>> makers;
  return makers;
}

}  // namespace

bool register_backend(const std::string& name, std::unique_ptr<Backend> (*make)(), int preference) {
  CREST_CHECK(backends().emplace(name, BackendEntry{make, preference}).second,
              "backend '" + name + "' registered twice");
  return true;
}

std::string default_backend_name() {
  std::string best;
  int best_preference = 0;
  for (const auto& [name, entry] : backends())
    if (best.empty() || entry.preference > best_preference) {
      best = name;
      best_preference = entry.preference;
    }
  return best;
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
std::vector<std::string> backend_names() {
  std::vector<std::string> names;
  if (backends().count("reference")) names.emplace_back("reference");
  for (const auto& [name, make] : backends())
    if (name != "reference") names.push_back(name);
  return names;
}

std::unique_ptr<Backend> make_backend(const std::string& name) {
  auto it = backends().find(name);
  if (it == backends().end()) {
    std::string known;
    for (const auto& n : backend_names()) known += (known.empty() ? "" : ", ") + n;
    throw_usage("unknown backend '" + name + "' (available: " + known + ")");
  }
  return it->second.make();
}

}  // namespace crest
