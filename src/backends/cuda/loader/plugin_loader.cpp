// Registers the "cuda" backend in every crest binary built with CUDA, without linking CUDA: the
// backend itself is the plugin libcrest_cuda.so (../plugin.hpp), loaded on the first question
// about it. Where it cannot be loaded (the CUDA libraries are missing, the file was not
// installed), the backend is unavailable with dlopen's reason, which make_backend and config
// checks report (exit 2).
#include <dlfcn.h>

#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include "crest/backends/kernels.hpp"
#include "cuda/plugin.hpp"

namespace crest::cuda {
namespace {

constexpr const char* kPluginFile = "libcrest_cuda.so";

// Where the plugin may be: $CREST_CUDA_PLUGIN, else beside the binary or library holding this
// code (the build tree's bin/), else its ../lib (an installed tree).
std::vector<std::string> plugin_candidates() {
  if (const char* path = std::getenv("CREST_CUDA_PLUGIN"); path && *path) return {path};
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&plugin_candidates), &info) == 0 || !info.dli_fname)
    return {kPluginFile};
  std::error_code ec;
  const auto self = std::filesystem::canonical(info.dli_fname, ec);
  const auto dir = (ec ? std::filesystem::path(info.dli_fname) : self).parent_path();
  return {(dir / kPluginFile).string(), (dir / ".." / "lib" / kPluginFile).string()};
}

struct Loaded {
  const PluginEntry* entry = nullptr;
  std::string error;  // why entry is null
};

// Loaded once per process and never unloaded: the plugin's kernels register themselves in the
// kernel registry when it loads, and those registrations must outlive every backend.
const Loaded& plugin() {
  static std::once_flag once;
  static Loaded loaded;
  std::call_once(once, [] {
    std::string errors;
    for (const std::string& path : plugin_candidates()) {
      void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!handle) {
        errors += std::string(errors.empty() ? "" : "; ") + dlerror();
        continue;
      }
      using EntryFn = const PluginEntry* (*)();
      auto fn = reinterpret_cast<EntryFn>(dlsym(handle, "crest_cuda_plugin_entry"));
      if (fn) {
        loaded.entry = fn();
        return;
      }
      errors += std::string(errors.empty() ? "" : "; ") + path + " has no crest_cuda_plugin_entry";
    }
    loaded.error = "cannot load the CUDA backend (" + errors + ")";
  });
  return loaded;
}

Support available() {
  const Loaded& p = plugin();
  return p.entry ? p.entry->available() : Support::no(p.error);
}

// Only called after available() said yes (make_backend asks first).
std::unique_ptr<Backend> make() { return plugin().entry->make(); }

}  // namespace

CREST_REGISTER_DEVICE_BACKEND(cuda, "cuda", make, 5, available);

}  // namespace crest::cuda
